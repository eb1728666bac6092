"""Send citeguard's spans to an OpenTelemetry collector over OTLP/HTTP.

Any OTLP backend works: Arize Phoenix, Langfuse, Jaeger, Grafana Tempo, Honeycomb, an
OpenTelemetry Collector. citeguard names its attributes with the OpenInference conventions, so
Phoenix and Langfuse show the RETRIEVER documents, the LLM token counts and the four axis scores
(as evaluations) natively.

    pip install 'citeguard-agent[otel]' opentelemetry-exporter-otlp-proto-http

    # Phoenix, locally:  pip install arize-phoenix && phoenix serve   (UI on http://localhost:6006)
    python examples/tracing_otlp.py
    python examples/tracing_otlp.py --endpoint http://localhost:6006/v1/traces

    # Langfuse (cloud or self-hosted) takes OTLP at /api/public/otel/v1/traces with basic auth:
    #   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://cloud.langfuse.com/api/public/otel/v1/traces
    #   OTEL_EXPORTER_OTLP_TRACES_HEADERS="Authorization=Basic <base64 of public_key:secret_key>"

The endpoint defaults to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and then to Phoenix's local
address. The run itself is the bundled demo served from 127.0.0.1; only the export needs the
collector. The tests never run this file (they have no network).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

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

PHOENIX_ENDPOINT = "http://localhost:6006/v1/traces"


def otlp_exporter(endpoint: str) -> Any:
    """The OTLP/HTTP span exporter, or a clear message when its package is not installed."""
    try:
        module = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    except ImportError:
        sys.exit(
            "this example needs the OTLP exporter: "
            "pip install opentelemetry-exporter-otlp-proto-http"
        )
    # headers come from OTEL_EXPORTER_OTLP_TRACES_HEADERS when set (e.g. Langfuse's auth)
    return module.OTLPSpanExporter(endpoint=endpoint)


async def main(endpoint: str, project: str) -> int:
    # service.name for every backend; openinference.project.name groups the traces in Phoenix
    resource = Resource.create({"service.name": project, "openinference.project.name": project})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(otlp_exporter(endpoint)))

    try:
        async with serve_site() as port:
            resolver = StaticResolver({h: f"127.0.0.1:{port}" for h in HOSTS})
            async with Guard(
                demo_policy(), resolver=resolver, tracer_provider=provider, now=lambda: DEMO_NOW
            ) as guard:
                agent = guard.wrap(make_agent(guard.wrap_search(search_tool, provider="demo")))
                result = await agent(QUESTION)
    finally:
        provider.shutdown()  # flushes the batch to the collector
    print(f"{result.outcome} after {len(result.attempts)} attempt(s); spans sent to {endpoint}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--endpoint",
        default=os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", PHOENIX_ENDPOINT),
        help="OTLP/HTTP traces endpoint (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or Phoenix)",
    )
    parser.add_argument("--project", default="citeguard-demo", help="service / project name")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.endpoint, args.project)))
