"""Guard a LangChain chain: a rejected citation, a regeneration, a pass, all offline.

    pip install 'citeguard-agent[langchain]'
    python examples/langchain_guarded_chain.py

The chain is the usual ``search | prompt | chat model | parser``. The chat model is LangChain's
``FakeListChatModel`` (the scripted stand-in for your LLM): its first answer cites a page that
404s, its second a page that says what it claims. The "web" is a two-page site on 127.0.0.1 that
the guard reaches through a ``StaticResolver`` (like ``curl --resolve``), so nothing leaves the
machine. Swap in your own model and search tool and the wiring stays the same:

* ``guard_tool(search_tool, guard)`` records each literal query and its results;
* the prompt reads ``exclude_urls`` and ``feedback``, which the guard fills in on every attempt;
* ``guard_runnable(chain, guard)`` runs the reject-and-regenerate loop and returns a GuardResult.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web

from citeguard import FetchPolicy, Guard, MissingExtraError, Policy, StaticResolver

try:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.tools import tool

    from citeguard.integrations.langchain import guard_runnable, guard_tool
except (ImportError, MissingExtraError) as exc:
    hint = "This example needs: pip install 'citeguard-agent[langchain]'"
    raise SystemExit(f"{exc}\n{hint}") from exc

QUESTION = "Who wrote the novel Middlemarch?"
PAGE = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p></article></body></html>"""
HOSTS = ("books.example.com", "gone.example.net")

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Answer from the search results and cite them as [n] with a reference list.\n"
            "Do not cite these URLs: {exclude_urls}\n"
            "Why your last answer was rejected, if it was: {feedback}",
        ),
        ("human", "Search results:\n{results}\n\nQuestion: {question}"),
    ]
)


async def serve_site() -> tuple[web.AppRunner, int]:
    """Two pages on 127.0.0.1 (an OS-chosen port), told apart by the Host header."""

    async def page(request: web.Request) -> web.Response:
        if request.host.split(":")[0] == "books.example.com":
            return web.Response(text=PAGE, content_type="text/html")
        return web.Response(status=404, text="gone")

    app = web.Application()
    app.router.add_get("/middlemarch", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, int(sock.getsockname()[1])


async def main() -> None:
    runner, port = await serve_site()
    good, dead = (f"http://{host}:{port}/middlemarch" for host in HOSTS)
    policy = Policy(fetch=FetchPolicy(allow_private_addresses=True))  # the site is on loopback
    resolver = StaticResolver(dict.fromkeys(HOSTS, "127.0.0.1"))
    try:
        async with Guard(policy, resolver=resolver, entailer=None) as guard:

            @tool
            def web_search(query: str) -> list[dict[str, str]]:
                """Search the web."""
                return [
                    {"url": dead, "title": "Middlemarch (old page)"},
                    {"url": good, "title": "Middlemarch"},
                ]

            search = guard_tool(web_search, guard)
            llm = FakeListChatModel(
                responses=[
                    f"Middlemarch was written by George Eliot [1].\n\n[1] {dead}\n",
                    f"Middlemarch is a novel by the English author George Eliot [1].\n\n"
                    f"[1] {good}\n",
                ]
            )

            def results(inputs: dict[str, Any]) -> Any:
                return search.invoke({"query": inputs["question"]})

            chain = RunnablePassthrough.assign(results=results) | PROMPT | llm | StrOutputParser()
            result = await guard_runnable(chain, guard).ainvoke({"question": QUESTION})
    finally:
        await runner.cleanup()

    for attempt in result.attempts:
        statuses = ", ".join(f"{c.url} → {c.status.value}" for c in attempt.verdict.citations)
        print(f"attempt {attempt.number}: passed={attempt.verdict.passed}  {statuses}")
        if attempt.feedback:
            print("  feedback given:", attempt.feedback.replace("\n", "\n  "))
    print(f"\n{result.outcome}: {result.message}\n\n{result.answer}")


if __name__ == "__main__":
    asyncio.run(main())
