"""Trace a guarded run to the console.

Runs the bundled demo scenario live against its local site on 127.0.0.1 (no network needed): the
agent first cites a dead URL, an invented quote and a stale source, is rejected, and answers again
without them. Every span is printed by OpenTelemetry's ``ConsoleSpanExporter`` as it ends, and an
indented tree of the whole run is printed at the end, showing which query was sent, which URL
failed and why, and which axis dropped.

    pip install 'citeguard-agent[otel]'
    python examples/tracing_console.py            # span JSON, then the tree
    python examples/tracing_console.py --tree     # the tree only

The provider is handed to the guard (``Guard(tracer_provider=...)``); citeguard never installs a
global provider. To trace every OpenTelemetry-instrumented library in the process instead, call
``trace.set_tracer_provider(provider)`` in your application and omit ``tracer_provider``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from citeguard.demo import (
    DEMO_NOW,
    HOSTS,
    QUESTION,
    demo_policy,
    make_agent,
    search_tool,
    serve_site,
)
from citeguard.guard import Guard
from citeguard.web.fetch import StaticResolver

# What to show next to each span name in the tree (when the span has it).
_SHOWN = (
    "citeguard.attempt",
    "citeguard.excluded_urls",
    "citeguard.status",
    "citeguard.reason",
    "citeguard.failed_stage",
    "citeguard.failed_axes",
    "citeguard.passed",
    "citeguard.outcome",
    "citeguard.search.result_count",
    "citeguard.freshness.regime",
)


def render_tree(spans: Sequence[ReadableSpan]) -> str:
    """An indented text tree of finished spans: kind, name, the input, and the telling fields."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in spans:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    for group in children.values():
        group.sort(key=lambda s: (s.start_time or 0, s.name))
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        a = dict(span.attributes or {})
        kind = a.get("openinference.span.kind", "")
        head = f"{'  ' * depth}{span.name} [{kind}]"
        if span.status.status_code.name == "ERROR":
            head += " ✗"
        if span.name in ("citeguard.search", "citeguard.citation"):
            head += f"  {a.get('input.value', '')}"
        shown = {k.removeprefix("citeguard."): a[k] for k in _SHOWN if k in a}
        if span.name.startswith("citeguard.axis."):
            shown["label"] = a.get("evaluations.0.evaluation.label")
            shown["score"] = a.get("evaluations.0.evaluation.score")
        if shown:
            head += "  " + json.dumps(shown, default=list, ensure_ascii=False)
        lines.append(head)
        for child in children.get(span.context.span_id, []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return "\n".join(lines)


async def main(tree_only: bool) -> int:
    provider = TracerProvider()
    collected = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(collected))
    if not tree_only:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))

    async with serve_site() as port:
        resolver = StaticResolver({h: f"127.0.0.1:{port}" for h in HOSTS})
        async with Guard(
            demo_policy(), resolver=resolver, tracer_provider=provider, now=lambda: DEMO_NOW
        ) as guard:
            agent = guard.wrap(make_agent(guard.wrap_search(search_tool, provider="demo")))
            result = await agent(QUESTION)
    provider.shutdown()

    print("\n=== span tree ===\n")
    print(render_tree(collected.get_finished_spans()))
    print(f"\noutcome: {result.outcome} after {len(result.attempts)} attempt(s)")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(tree_only="--tree" in sys.argv[1:])))
