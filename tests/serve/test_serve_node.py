"""The ``openai`` npm package under Node pointed at the service: a guarded answer, a stream read
by the SDK's own reader, a failing answer's ``content_filter`` ending, and the 422 a rejected
answer becomes with ``on_fail: raise``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from serve.answers import dead, good
from serve.servers import KEY, FakeUpstream, Pages, Service

NODE_DIR = Path(__file__).resolve().parent / "node"

SCRIPT = r"""
const OpenAI = require("openai");
const client = new OpenAI({
  baseURL: process.argv[2] + "/v1", apiKey: process.argv[3], maxRetries: 0,
});
const messages = [{ role: "user", content: "How tall is the Eiffel Tower?" }];
(async () => {
  const out = {};
  const { data, response } = await client.chat.completions
    .create({ model: "m", messages }).withResponse();
  out.text = data.choices[0].message.content;
  out.finish = data.choices[0].finish_reason;
  out.verdict = response.headers.get("x-citeguard-verdict");
  out.citeguard = data.citeguard.verdict;
  const stream = await client.chat.completions.create({ model: "m", messages, stream: true });
  out.streamed = "";
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      out.streamed += c.delta.content || "";
      if (c.finish_reason) out.stream_finish = c.finish_reason;
    }
    if (chunk.citeguard) out.stream_verdict = chunk.citeguard.verdict;
  }
  if (process.argv[4] === "raise") {
    try { await client.chat.completions.create({ model: "m", messages }); }
    catch (e) { out.status = e.status; out.error_type = e.error && e.error.type; }
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(String(e)); process.exit(1); });
"""


@pytest.fixture(scope="session")
def node_openai() -> Path:
    """The openai npm package, installed into tests/serve/node (scripts/test does it first)."""
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed"
    if not (NODE_DIR / "node_modules" / "openai").is_dir():
        NODE_DIR.mkdir(exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(NODE_DIR),
                "openai",
            ],
            check=True,
            timeout=300,
        )
    script = NODE_DIR / "client.cjs"
    script.write_text(SCRIPT)
    return script


def _run(script: Path, service: Service, mode: str = "") -> dict[str, object]:
    out = subprocess.run(
        ["node", str(script), service.url, KEY, mode],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_node_openai_sdk(
    node_openai: Path, service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(good(pages))
    out = _run(node_openai, service)
    assert out == {
        "text": good(pages),
        "finish": "stop",
        "verdict": "passed",
        "citeguard": "passed",
        "streamed": good(pages),
        "stream_finish": "stop",
        "stream_verdict": "passed",
    }


def test_node_openai_sdk_failing_answer_is_content_filtered(
    node_openai: Path, service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(dead(pages))
    out = _run(node_openai, service)
    assert out["finish"] == out["stream_finish"] == "content_filter"
    assert out["verdict"] == out["citeguard"] == out["stream_verdict"] == "rejected"
    assert "/dead" not in str(out["text"]) and "/dead" not in str(out["streamed"])


def test_node_openai_sdk_rejected(
    node_openai: Path, raising_service: Service, upstream: FakeUpstream, pages: Pages
) -> None:
    upstream.script(good(pages), good(pages), dead(pages))
    out = _run(node_openai, raising_service, "raise")
    assert out["status"] == 422 and out["error_type"] == "citation_rejected"
