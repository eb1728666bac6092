"""The real ``citeguard serve`` process: configured by flags, environment and files, ready once
its model is loaded, refusing to listen beyond loopback without keys, draining on SIGTERM."""

from __future__ import annotations

import concurrent.futures
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serve.answers import good
from serve.processes import Served, run_bare, start, stop, wait_ready
from serve.servers import FakeUpstream, Pages, serve_policy


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(serve_policy().model_dump_json())
    return path


@pytest.fixture
def served(tmp_path: Path, policy_file: Path, upstream: FakeUpstream) -> Iterator[Served]:
    keys = tmp_path / "keys"
    keys.write_text("# clients\nsk-file-key\n")
    env = {
        "CITEGUARD_POLICY": str(policy_file),
        "CITEGUARD_UPSTREAM": upstream.url,
        "CITEGUARD_API_KEYS": "sk-env-key",
        "CITEGUARD_UPSTREAM_API_KEY": "sk-upstream",
    }
    served = start(["--port", "0", "--api-keys-file", str(keys)], env)
    try:
        yield served
    finally:
        stop(served)


def test_serve_process_end_to_end(served: Served, upstream: FakeUpstream, pages: Pages) -> None:
    proc, url = served.proc, served.url
    wait_ready(url)
    for key in ("sk-env-key", "sk-file-key"):
        r = httpx.post(
            f"{url}/v1/check",
            json={"answer": good(pages)},
            headers={"authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert r.json()["passed"] is True
    upstream.script(good(pages))
    r = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "q"}]},
        headers={"authorization": "Bearer sk-env-key"},
        timeout=60,
    )
    assert r.headers["x-citeguard-verdict"] == "passed"
    # the server's upstream key went upstream, not the client's citeguard key
    assert upstream.headers[-1]["Authorization"] == "Bearer sk-upstream"
    # SIGTERM while a request is in flight: it is answered before the process ends
    upstream.script(good(pages))
    upstream.behaviour = "slow"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            httpx.post,
            f"{url}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "q"}]},
            headers={"authorization": "Bearer sk-env-key"},
            timeout=60,
        )
        while not upstream.requests and not pending.done():
            pass  # until the upstream holds the request
        proc.send_signal(signal.SIGTERM)
        drained = pending.result(60)
    assert drained.status_code == 200
    assert drained.headers["x-citeguard-verdict"] == "passed"
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.wait(60) in (0, -signal.SIGTERM)
    served.reader.join(30)  # the log's last lines
    lines = [json.loads(ln) for ln in served.log if ln.startswith("{")]
    assert any("Finished server process" in ln.get("message", "") for ln in lines)
    requests = [ln for ln in lines if ln.get("event") == "request"]
    chat = next(ln for ln in requests if ln["path"] == "/v1/chat/completions")
    assert chat["verdict"] == "passed" and chat["axes"]["validity"] is True
    assert "upstream_ms" in chat and chat["key"] != "-"
    assert not any("sk-env-key" in json.dumps(ln) for ln in lines)  # no key in the log
    assert not any(good(pages) in json.dumps(ln) for ln in lines)  # no answer text either


def test_no_key_binds_loopback_only(policy_file: Path) -> None:
    out = run_bare(["--host", "0.0.0.0", "--port", "0"])
    assert out.returncode == 2
    assert "binds to 127.0.0.1 only" in out.stderr
    assert "Traceback" not in out.stderr


def test_runtime_is_tuned_unless_told() -> None:
    import argparse

    from citeguard.errors import PolicyError
    from citeguard.serve.main import runtime_of, settings_of

    none = argparse.Namespace(runtime=None)
    assert runtime_of(none, {}) == "tuned"
    assert runtime_of(none, {"CITEGUARD_RUNTIME": "default"}) == "default"
    assert runtime_of(argparse.Namespace(runtime="default"), {"CITEGUARD_RUNTIME": "tuned"}) == (
        "default"
    )
    with pytest.raises(PolicyError, match="runtime"):
        runtime_of(none, {"CITEGUARD_RUNTIME": "fast"})
    # an app that embeds create_app keeps the interpreter's own settings
    assert settings_of(none, {}).runtime == "default"
