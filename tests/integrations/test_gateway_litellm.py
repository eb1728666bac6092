"""citeguard inside a real LiteLLM proxy process (``litellm --config``), in front of a loopback
upstream speaking OpenAI's Chat Completions (JSON and SSE) whose answers cite good, dead and
misquoted pages on another loopback server; the ``openai`` SDK is the client.

Two paths: the guardrail class (``guardrail: citeguard.integrations.litellm.CiteguardGuardrail``)
and LiteLLM's generic guardrail API (``guardrail: generic_guardrail_api``) pointed at
citeguard's gateway endpoints under uvicorn, plus generic guardrails that cannot reach citeguard
(LiteLLM's ``unreachable_fallback``), alone or run by the policy pipeline docs/gateways.md gives
(attached by a request tag here). The proxy runs from ``.venv-litellm`` (scripts/test builds
it); without it these tests skip, and in CI (``CI=true``) they fail.
"""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from citeguard.serve import Settings
from tests.integrations.gateway_servers import (
    QUESTION,
    LiteLLMProxy,
    Servers,
    answers,
    documented,
    documented_keys,
    gateway_app,
    policy_json,
    require_litellm,
    write_config,
)

openai = pytest.importorskip("openai")

CLASS = "citeguard.integrations.litellm.CiteguardGuardrail"
MODELS = ["good", "dead", "dead_second", "misquoted", "misquoted_alone", "annotated"]
pytestmark = pytest.mark.timeout(600)


def _closed_port() -> str:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there: connections are refused
    return f"http://127.0.0.1:{port}"


def _class(name: str, policy: Path, on_fail: str, default_on: bool = False) -> dict[str, Any]:
    return {
        "guardrail_name": name,
        "litellm_params": {
            "guardrail": CLASS,
            "mode": "post_call",
            "default_on": default_on,
            "on_fail": on_fail,
            "policy": str(policy),
        },
    }


def _generic(name: str, api_base: str, **params: Any) -> dict[str, Any]:
    return {
        "guardrail_name": name,
        "litellm_params": {
            "guardrail": "generic_guardrail_api",
            "mode": "post_call",
            "api_base": api_base,
            "default_on": False,
            "streaming_end_of_stream_only": True,
            **params,
        },
    }


def _documented_config(section: str) -> dict[str, Any]:
    """The first ``config.yaml`` of docs/gateways.md's section ``## LiteLLM: <section>``."""
    config: dict[str, Any] = yaml.safe_load(documented(f"LiteLLM: {section}", "yaml"))
    return config


GENERIC_DOCS = "the generic guardrail API"
POLICY_TAG = "citeguard-policy"  # the tag that attaches the documented policy here


def _documented_policies(guardrails: list[str]) -> dict[str, Any]:
    """The policy docs/gateways.md puts around the generic guardrail, for each of
    ``guardrails``, each attached by its own request tag (``POLICY_TAG:<name>``) instead of
    to every request, so the other tests of this proxy run without it."""
    given = _documented_config(GENERIC_DOCS)
    ((name, policy),) = given["policies"].items()
    step = policy["pipeline"]["steps"][0]
    assert step["guardrail"] == name and policy["guardrails"]["add"] == [name]
    return {
        "policies": {
            g: {
                "guardrails": {"add": [g]},
                "pipeline": {**policy["pipeline"], "steps": [{**step, "guardrail": g}]},
            }
            for g in guardrails
        },
        "policy_attachments": [{"policy": g, "tags": [f"{POLICY_TAG}:{g}"]} for g in guardrails],
    }


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with Servers() as s:
        yield s


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.json"
    path.write_text(policy_json())
    return path


@pytest.fixture(scope="module")
def serve_url() -> Iterator[str]:
    with gateway_app() as url:
        yield url


@pytest.fixture(scope="module")
def proxy(
    servers: Servers, policy_file: Path, serve_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiteLLMProxy]:
    python = require_litellm()
    down = _closed_port()
    config = write_config(
        tmp_path_factory.mktemp("litellm") / "config.yaml",
        upstream=servers.upstream,
        models=MODELS,
        guardrails=[
            _class("citeguard", policy_file, "block"),
            _class("citeguard-repair", policy_file, "repair"),
            _class("citeguard-annotate", policy_file, "annotate"),
            _generic("citeguard-api", serve_url),
            _generic(
                "citeguard-api-repair",
                serve_url,
                additional_provider_specific_params={"on_fail": "repair"},
            ),
            _generic("down-open", down, unreachable_fallback="fail_open"),
            _generic("down-closed", down, unreachable_fallback="fail_closed"),
            _generic(
                "citeguard-api-policy-repair",
                serve_url,
                additional_provider_specific_params={"on_fail": "repair"},
            ),
            _generic("down-closed-policy", down, unreachable_fallback="fail_closed"),
        ],
        extra=_documented_policies(["citeguard-api-policy-repair", "down-closed-policy"]),
    )
    with LiteLLMProxy(python, config) as p:
        yield p


@pytest.fixture(scope="module")
def client(proxy: LiteLLMProxy) -> Any:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=proxy.key, max_retries=0, timeout=60)


def _ask(client: Any, model: str, guardrails: list[str]) -> tuple[Any, Any]:
    """(the parsed completion, the HTTP response)."""
    raw = client.chat.completions.with_raw_response.create(
        model=model,
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"guardrails": guardrails},
    )
    return raw.parse(), raw


def _stream(
    client: Any, model: str, guardrails: list[str], tags: list[str] | None = None
) -> tuple[str, list[Any]]:
    """The streamed text and the chunks (raises what the stream raises); ``tags``: the
    request's tags (what attaches a policy)."""
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": QUESTION}],
            extra_body={"guardrails": guardrails, **({"tags": tags} if tags else {})},
            stream=True,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def _gone(servers: Servers) -> str:
    """The dead page as a block message names it: LiteLLM redacts the loopback host in error
    messages to clients, so the port and path."""
    return f":{servers.site.rsplit(':', 1)[1]}/gone"


def _urls(completion: Any) -> list[str]:
    annotations = completion.choices[0].message.annotations or []
    return [a.url_citation.url for a in annotations]


# --------------------------------------------------------------------------------------------
# The guardrail class
# --------------------------------------------------------------------------------------------


def test_a_good_answer_passes_unchanged_with_its_verdict(client: Any, servers: Servers) -> None:
    completion, raw = _ask(client, "good", ["citeguard"])
    assert completion.choices[0].message.content == answers(servers.site)["good"]
    assert _urls(completion) == [f"{servers.site}/tower?utm_source=openai"] * 2
    assert "citeguard" in raw.headers["x-litellm-applied-guardrails"].split(",")
    assert raw.headers["x-citeguard-action"] == "pass"
    verdict = completion.model_extra["citeguard"]
    assert verdict["passed"] is True and verdict["action"] == "pass"
    assert {c["status"] for c in verdict["citations"]} == {"ok"}


def test_a_dead_citation_is_blocked_with_a_clear_error(client: Any, servers: Servers) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, "dead", ["citeguard"])
    message = info.value.body["message"] if isinstance(info.value.body, dict) else str(info.value)
    assert "citeguard blocked the answer" in message
    assert _gone(servers) in message and "not_found" in message
    assert info.value.response.headers["x-litellm-applied-guardrails"] == "citeguard"


def test_a_misquote_is_blocked(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, "misquoted", ["citeguard"])
    assert "passage_altered" in str(info.value) and "450" in str(info.value)


def test_a_citation_only_in_the_annotations_is_checked(client: Any, servers: Servers) -> None:
    # the text names no link: only the url_citation annotation cites the dead page
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, "annotated", ["citeguard"])
    assert _gone(servers) in str(info.value)


def test_repair_re_points_a_dead_citation_at_a_page_that_supports_it(
    client: Any, servers: Servers
) -> None:
    completion, raw = _ask(client, "dead", ["citeguard-repair"])
    content = completion.choices[0].message.content
    assert "/gone" not in content and content.count(f"{servers.site}/tower") == 2
    assert content.startswith('The Eiffel Tower "stands 330 metres tall"')
    # the annotations follow the repaired text
    for a in completion.choices[0].message.annotations:
        span = content[a.url_citation.start_index : a.url_citation.end_index]
        assert a.url_citation.url in span
    verdict = completion.model_extra["citeguard"]
    assert verdict["action"] == "repair" and verdict["passed"] is True
    assert [r["kind"] for r in verdict["repairs"]] == ["swap"]
    assert verdict["offending_urls"] == [f"{servers.site}/gone?utm_source=openai"]
    assert raw.headers["x-citeguard-action"] == "repair"


def test_a_misquote_repair_cannot_mend_is_still_blocked(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, "misquoted_alone", ["citeguard-repair"])
    assert "repair could not fix it" in str(info.value)


def test_repair_drops_a_misquoted_claim_and_keeps_the_page_its_neighbour_stands_on(
    client: Any, servers: Servers
) -> None:
    """A misquote is one claim's failure, not the page's (issue 43, a neighbour's failure):
    repair drops that claim and keeps the claim the same page supports."""
    completion, _ = _ask(client, "misquoted", ["citeguard-repair"])
    content = completion.choices[0].message.content
    assert "450" not in content and content.startswith('It is "made of wrought iron"')
    assert f"{servers.site}/tower" in content
    verdict = completion.model_extra["citeguard"]
    assert verdict["verdict"] == "repaired" and verdict["action"] == "repair"
    assert verdict["offending_urls"] == []
    assert [c["status"] for c in verdict["citations"]] == ["passage_altered"]


def test_annotate_lets_a_failing_answer_through_with_its_verdict(
    client: Any, servers: Servers
) -> None:
    completion, raw = _ask(client, "dead", ["citeguard-annotate"])
    assert completion.choices[0].message.content == answers(servers.site)["dead"]
    verdict = completion.model_extra["citeguard"]
    assert verdict["passed"] is False and verdict["action"] == "annotate"
    assert verdict["failed_axes"] == ["validity"]
    assert raw.headers["x-citeguard-action"] == "annotate"


def test_a_good_stream_arrives_whole(client: Any, servers: Servers) -> None:
    text, chunks = _stream(client, "good", ["citeguard"])
    assert text == answers(servers.site)["good"]
    assert chunks[-1].choices[0].finish_reason == "stop"


def _ending(chunks: list[Any]) -> tuple[list[str], dict[str, Any]]:
    """A stream's finish reasons, and the verdict on the chunk that ended it."""
    ends = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    reasons = [c.choices[0].finish_reason for c in ends]
    return reasons, (ends[-1].model_extra or {}).get("citeguard", {}) if ends else {}


def test_a_stream_with_a_dead_citation_is_held_then_blocked(client: Any, servers: Servers) -> None:
    text, chunks = _stream(client, "dead", ["citeguard"])
    # the failing first sentence was held: nothing of the answer reached the client, and the
    # stream ends as one OpenAI's own filter cut, the verdict on its last chunk
    assert text == ""
    reasons, verdict = _ending(chunks)
    assert reasons == ["content_filter"]
    assert verdict["verdict"] == "rejected" and verdict["action"] == "block"
    assert verdict["message"].startswith("citeguard blocked the answer")
    assert any(u.startswith(f"{servers.site}/gone") for u in verdict["offending_urls"])


def test_a_stream_releases_the_verified_sentence_before_blocking(
    client: Any, servers: Servers
) -> None:
    text, chunks = _stream(client, "dead_second", ["citeguard"])
    first = answers(servers.site)["dead_second"].split(". ")[0]
    # the first sentence's citation passed, so it was sent; the second was held, then blocked
    assert text.startswith(first) and "/gone" not in text
    assert "made of wrought iron" not in text
    reasons, verdict = _ending(chunks)
    assert reasons == ["content_filter"]
    assert any(u.startswith(f"{servers.site}/gone") for u in verdict["offending_urls"])


def test_an_annotated_stream_sends_the_held_text_at_its_end(client: Any, servers: Servers) -> None:
    text, chunks = _stream(client, "dead", ["citeguard-annotate"])
    assert text == answers(servers.site)["dead"]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_stream_is_repaired(client: Any, servers: Servers) -> None:
    text, chunks = _stream(client, "dead", ["citeguard-repair"])
    assert "/gone" not in text and text.count(f"{servers.site}/tower") == 2
    assert text.startswith('The Eiffel Tower "stands 330 metres tall"')
    assert chunks[-1].choices[0].finish_reason == "stop"


def _respond(client: Any, model: str, guardrails: list[str]) -> Any:
    return client.responses.create(
        model=model, input=QUESTION, extra_body={"guardrails": guardrails}
    )


def test_a_good_responses_api_answer_passes(client: Any, servers: Servers) -> None:
    response = _respond(client, "good", ["citeguard"])
    assert response.output_text == answers(servers.site)["good"]
    assert response.model_extra["citeguard"]["passed"] is True


def test_a_responses_api_dead_citation_is_blocked(client: Any, servers: Servers) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _respond(client, "dead", ["citeguard"])
    assert _gone(servers) in str(info.value) and "not_found" in str(info.value)


def test_a_responses_api_answer_is_repaired(client: Any, servers: Servers) -> None:
    response = _respond(client, "dead", ["citeguard-repair"])
    text = response.output_text
    assert "/gone" not in text and text.count(f"{servers.site}/tower") == 2
    part = next(p for item in response.output if item.type == "message" for p in item.content)
    assert [a.url for a in part.annotations] == [f"{servers.site}/tower?utm_source=openai"] * 2


# --------------------------------------------------------------------------------------------
# LiteLLM's generic guardrail API, served by citeguard
# --------------------------------------------------------------------------------------------


def test_generic_api_passes_a_good_answer_unchanged(client: Any, servers: Servers) -> None:
    completion, raw = _ask(client, "good", ["citeguard-api"])
    assert completion.choices[0].message.content == answers(servers.site)["good"]
    assert "citeguard-api" in raw.headers["x-litellm-applied-guardrails"].split(",")


def test_generic_api_blocks_a_dead_citation(client: Any, servers: Servers) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, "dead", ["citeguard-api"])
    assert _gone(servers) in str(info.value) and "not_found" in str(info.value)


def test_generic_api_repairs(client: Any, servers: Servers) -> None:
    completion, _ = _ask(client, "dead", ["citeguard-api-repair"])
    content = completion.choices[0].message.content
    assert "/gone" not in content and content.count(f"{servers.site}/tower") == 2


def test_generic_api_does_not_see_annotations(client: Any, servers: Servers) -> None:
    # the documented limit: only texts reach the API. The annotation citing the dead page is
    # never seen; the text alone cites nothing (blocked for that, as min_citations=1 asks)
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, "annotated", ["citeguard-api"])
    assert "cites no sources" in str(info.value) and "/gone" not in str(info.value)


def test_generic_api_blocks_a_stream_at_its_end(client: Any) -> None:
    with pytest.raises(openai.APIError) as info:
        _stream(client, "misquoted", ["citeguard-api"])
    assert "passage_altered" in str(info.value)


def test_unreachable_citeguard_fail_open_passes_the_answer(client: Any, servers: Servers) -> None:
    completion, _ = _ask(client, "dead", ["down-open"])
    assert completion.choices[0].message.content == answers(servers.site)["dead"]


def test_unreachable_citeguard_fail_closed_refuses_it(client: Any) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        _ask(client, "good", ["down-closed"])
    assert info.value.status_code >= 400


def _tag(guardrail: str) -> list[str]:
    return [f"{POLICY_TAG}:{guardrail}"]


def test_generic_api_alone_drops_a_stream_repair_as_the_docs_warn(
    client: Any, servers: Servers
) -> None:
    """LiteLLM's limit docs/gateways.md warns of (why it gives the policy): run alone, the
    generic guardrail's rewrite of a stream is dropped, the answer arriving as the model wrote
    it. Should a LiteLLM release deliver it, this fails and the docs' warning can go."""
    text, chunks = _stream(client, "misquoted", ["citeguard-api-repair"])
    assert text == answers(servers.site)["misquoted"]
    assert _ending(chunks)[0] == ["stop"]


def test_generic_api_policy_delivers_a_repaired_stream(client: Any, servers: Servers) -> None:
    """Run by the documented policy, the generic guardrail's mended stream arrives."""
    text, chunks = _stream(client, "dead", [], tags=_tag("citeguard-api-policy-repair"))
    assert "/gone" not in text and text.count(f"{servers.site}/tower") == 2
    assert text.startswith('The Eiffel Tower "stands 330 metres tall"')
    assert _ending(chunks)[0] == ["stop"]


def test_generic_api_policy_ends_a_stream_repair_cannot_mend_as_filtered(
    client: Any, proxy: LiteLLMProxy
) -> None:
    before = len(proxy.output())
    text, chunks = _stream(client, "misquoted_alone", [], tags=_tag("citeguard-api-policy-repair"))
    assert _ending(chunks)[0] == ["content_filter"]
    assert text.startswith("citeguard blocked the answer") and "stands 450" not in text
    log = proxy.output()[before:]
    assert "Traceback" not in log
    assert sum("citeguard blocked the answer" in line for line in log.splitlines()) == 1, log


def test_generic_api_policy_fails_closed_as_filtered_when_citeguard_is_unreachable(
    client: Any,
) -> None:
    text, chunks = _stream(client, "good", [], tags=_tag("down-closed-policy"))
    assert _ending(chunks)[0] == ["content_filter"]
    assert text.startswith("Generic Guardrail API failed")


# --------------------------------------------------------------------------------------------
# default_on, and the Guard closed with the proxy
# --------------------------------------------------------------------------------------------


def test_default_on_guards_every_request_and_closes_with_the_proxy(
    servers: Servers, policy_file: Path, tmp_path: Path
) -> None:
    python = require_litellm()
    config = write_config(
        tmp_path / "config.yaml",
        upstream=servers.upstream,
        models=["good", "dead"],
        guardrails=[_class("citeguard", policy_file, "block", default_on=True)],
    )
    with LiteLLMProxy(python, config) as p:
        c = openai.OpenAI(base_url=f"{p.url}/v1", api_key=p.key, max_retries=0, timeout=60)
        ok = c.chat.completions.create(model="good", messages=[{"role": "user", "content": "?"}])
        assert ok.model_extra["citeguard"]["passed"] is True
        with pytest.raises(openai.BadRequestError):
            c.chat.completions.create(model="dead", messages=[{"role": "user", "content": "?"}])
        assert p.stop(signal.SIGINT) == 0  # Ctrl-C: the event loop ends, the Guard closes
    assert "guardrail citeguard closed its Guard" in p.output()
    assert json.loads(config.read_text())["guardrails"][0]["litellm_params"]["default_on"]


# --------------------------------------------------------------------------------------------
# The setup docs/gateways.md gives, started as written
# --------------------------------------------------------------------------------------------


@contextmanager
def _started_as_written(
    config: dict[str, Any], servers: Servers, tmp_path: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[LiteLLMProxy, Any]]:
    """A documented config started with its own master key (no ``LITELLM_MASTER_KEY``) and
    what a reader changes: the model routes (the documented route's parameters, to the
    loopback upstream's models). A good stream is checked to pass through it whole; yields the
    proxy and an ``openai`` client with that key."""
    python = require_litellm()
    key = config["general_settings"]["master_key"]
    params = config["model_list"][0]["litellm_params"]
    config["model_list"] = [
        {
            "model_name": m,
            "litellm_params": {
                **params,
                "model": f"openai/{m}",
                "api_base": f"{servers.upstream}/v1",
                "api_key": "sk-upstream",
            },
        }
        for m in ("good", "dead", "misquoted")
    ]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with LiteLLMProxy(python, path, env, master_key=key) as p:
        c = openai.OpenAI(base_url=f"{p.url}/v1", api_key=key, max_retries=0, timeout=60)
        text, chunks = _stream(c, "good", [])
        assert text == answers(servers.site)["good"] and _ending(chunks)[0] == ["stop"]
        yield p, c


def _stream_helper_raises_content_filter(client: Any, model: str) -> None:
    """The SDK's stream helper has no final completion to give a filtered stream: it raises."""
    messages = [{"role": "user", "content": QUESTION}]
    with (
        client.chat.completions.stream(model=model, messages=messages) as stream,
        pytest.raises(openai.ContentFilterFinishReasonError),
    ):
        stream.get_final_completion()


def test_the_documented_config_starts_and_logs_a_blocked_stream_as_one_line(
    servers: Servers, policy_file: Path, tmp_path: Path
) -> None:
    config = _documented_config("the guardrail class")
    # what a reader changes besides the routes: the policy file; the optional Redis left out
    guardrail = config["guardrails"][0]["litellm_params"]
    guardrail["policy"] = str(policy_file)
    del guardrail["redis"]
    with _started_as_written(config, servers, tmp_path) as (p, c):
        before = len(p.output())
        text, chunks = _stream(c, "dead", [])
        reasons, verdict = _ending(chunks)
        assert text == "" and reasons == ["content_filter"]  # never an ordinary stop
        assert verdict["verdict"] == "rejected"
        _stream_helper_raises_content_filter(c, "dead")
        log = p.output()[before:]
    assert "Traceback" not in log
    blocked = [line for line in log.splitlines() if "citeguard blocked a stream" in line]
    assert len(blocked) == 2, log[-4000:]  # one line per blocked stream
    assert all(_gone(servers) in line or "/gone" in line for line in blocked)


def test_the_documented_generic_api_config_ends_a_blocked_stream_filtered_in_one_log_line(
    servers: Servers, serve_url: str, tmp_path: Path
) -> None:
    """Issue 44: the generic guardrail API set up as docs/gateways.md writes it starts (its
    own master key), and a blocked answer, streamed or not, ends as a content filter's; the
    proxy logs one line for it, not an ERROR with a traceback."""
    config = _documented_config(GENERIC_DOCS)
    # what a reader changes besides the routes: where citeguard serve runs
    config["guardrails"][0]["litellm_params"]["api_base"] = serve_url
    with _started_as_written(config, servers, tmp_path) as (p, c):
        before = len(p.output())
        text, chunks = _stream(c, "misquoted", [])
        # nothing of the answer reached the client: citeguard's reason did, then the ending
        # of an answer a filter stopped, never an ordinary stop
        assert _ending(chunks)[0] == ["content_filter"]
        assert text.startswith("citeguard blocked the answer") and "passage_altered" in text
        assert "stands 450 metres tall" not in text
        _stream_helper_raises_content_filter(c, "misquoted")
        completion = c.chat.completions.create(
            model="misquoted", messages=[{"role": "user", "content": QUESTION}]
        )
        assert completion.choices[0].finish_reason == "content_filter"
        assert completion.choices[0].message.content.startswith("citeguard blocked the answer")
        log = p.output()[before:]
    assert "Traceback" not in log, log[-4000:]
    blocked = [line for line in log.splitlines() if "citeguard blocked the answer" in line]
    assert len(blocked) == 3, log[-4000:]  # one line per blocked answer
    assert all("Generic Guardrail API blocked request" in line for line in blocked)


def test_the_documented_generic_api_config_sends_citeguard_its_key(
    servers: Servers, tmp_path: Path
) -> None:
    """Issue 53: followed as written, with ``citeguard serve`` requiring the key the docs'
    shell lines give it, the generic guardrail reaches citeguard (LiteLLM sends the configured
    ``api_key`` as ``x-api-key``): a good answer passes, a misquoted one is blocked with
    citeguard's reason, not LiteLLM's "Generic Guardrail API failed" (a 401)."""
    config = _documented_config(GENERIC_DOCS)
    keys, variable, key = documented_keys(documented(f"LiteLLM: {GENERIC_DOCS}", "bash"))
    params = config["guardrails"][0]["litellm_params"]
    assert params["api_key"] == f"os.environ/{variable}" and key in keys
    documented_base = urlsplit(params["api_base"])
    assert documented_base.port == Settings().port  # where citeguard serve listens
    with gateway_app(api_keys=frozenset(keys)) as url:
        # what a reader changes besides the routes: citeguard's host (the test's port)
        params["api_base"] = url + documented_base.path
        with _started_as_written(config, servers, tmp_path, {variable: key}) as (_, c):
            completion = c.chat.completions.create(
                model="misquoted", messages=[{"role": "user", "content": QUESTION}]
            )
    content = completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "content_filter"
    assert content.startswith("citeguard blocked the answer") and "passage_altered" in content
