"""From a real guarded run to the report: ``GuardResult.to_case()`` lines appended to a JSONL log
are what ``citeguard report`` reads, against the farm on 127.0.0.1."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from conftest import Farm

from citeguard import Guard, Policy
from citeguard.cli import main
from citeguard.policy import FetchPolicy
from citeguard.report import report_file

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
PAGE = """<html><head><title>Middlemarch</title></head><body><article>
<p>Middlemarch is a novel by the English author George Eliot, first published in eight
installments in 1871 and 1872.</p></article></body></html>"""


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.passages: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("class") == "passage" and a.get("href"):
            self.passages.append(str(a["href"]))


async def test_logged_runs_make_the_report(farm: Farm, tmp_path: Path) -> None:
    good = farm.add("books.example.com", "/middlemarch", body=PAGE)
    dead = farm.add("gone.example.net", "/middlemarch", status=404, body="nope")
    policy = Policy(
        fetch=FetchPolicy(
            allow_private_addresses=True, url_timeout=3.0, answer_deadline=5.0, retries=0
        ),
        on_fail="report",
    )

    async def search(query: str) -> list[dict[str, Any]]:
        return [{"url": good, "title": "Middlemarch"}]

    log = tmp_path / "cases.jsonl"
    question = "Who wrote Middlemarch?"
    async with Guard(policy, resolver=farm.resolver, entailer=None, now=lambda: NOW) as guard:
        searched = guard.wrap_search(search)

        async def agent(q: str, *, exclude_urls: frozenset[str] = frozenset(), **_: Any) -> str:
            await searched("Middlemarch author")
            text = 'Middlemarch is "a novel by the English author George Eliot" [1].'
            if "fail" in q:  # and a second claim citing a dead page
                text += f" It was first published in 1871 [2].\n\n[1] {good}\n[2] {dead}\n"
                return text
            return text + f"\n\n[1] {good}\n"

        for day, q in enumerate([question, question + " (fail)", question + " (fail)"]):
            result = await guard.run(agent, q)
            with log.open("a", encoding="utf-8") as f:
                f.write(json.dumps(result.to_case(q, timestamp=NOW + timedelta(days=day))) + "\n")

    report = report_file(log)
    assert report.cases == 3 and report.passed == 1 and report.queries == 3
    rates = {a.axis: a for a in report.axes}
    assert (rates["validity"].evaluated, rates["validity"].failed) == (3, 2)
    assert report.citation_statuses == {"ok": 3, "not_found": 2}
    assert report.timeline is not None and report.timeline.bucket == "hour"
    assert len(report.timeline.buckets) == 3
    assert [w.label for w in report.worst] == ["line 2", "line 3"]
    worst = report.worst[0]
    assert worst.prompt == question + " (fail)" and worst.failed_axes == ["validity"]
    assert [c.status for c in worst.citations] == ["not_found", "ok"]  # failing first
    assert worst.citations[0].url == dead and worst.citations[0].claims
    fragment = worst.citations[1].text_fragment_url
    assert fragment is not None and fragment.startswith(good + "#:~:text=")

    html = tmp_path / "report.html"
    assert main(["report", str(log), "--html", str(html)], out=io.StringIO()) == 0
    links = _Links()
    links.feed(html.read_text(encoding="utf-8"))
    assert links.passages == [fragment, fragment]  # the good page, in both failing answers
