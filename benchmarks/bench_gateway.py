"""What citeguard adds to a request through a LiteLLM proxy (issue 36's measure).

A real ``litellm --config`` proxy (from ``.venv-litellm``; scripts/test builds it) in front of a
loopback upstream that speaks Chat Completions; its answer cites two sentences of one page on
another loopback server (``tests/integrations/gateway_servers.py``). Contenders, interleaved in
a rotating order, the same request each time:

* ``proxy_alone``: the proxy, no guardrail (the baseline);
* ``proxy_class``: the proxy with ``citeguard.integrations.litellm.CiteguardGuardrail``;
* ``proxy_generic``: the proxy with ``generic_guardrail_api`` pointed at citeguard's endpoint
  (uvicorn, in this process);
* ``check_alone``: ``Guard.check`` on the same response, in process, no proxy.

Two page regimes: ``fresh`` (every request cites URLs never fetched before: the fetch is paid
each time) and ``cached`` (the same URLs every time: the Guard's TTL cache answers). What the
guardrail adds is the paired difference ``proxy_class − proxy_alone`` of each round (p50 / p95),
reported beside ``check_alone``. Timings are wall clock on a shared machine: read the ratios and
differences, and the load average written beside them.

``python -m benchmarks.bench_gateway [--rounds N]`` writes ``benchmarks/results/gateway.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.integrations.gateway_servers import (  # noqa: E402
    QUESTION,
    LiteLLMProxy,
    Servers,
    answers,
    completion,
    gateway_app,
    litellm_python,
    policy_json,
    write_config,
)

CLASS = "citeguard.integrations.litellm.CiteguardGuardrail"
OUT = ROOT / "benchmarks" / "results" / "gateway.json"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def _stats(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_pct(samples, 0.5), 2),
        "p95_ms": round(_pct(samples, 0.95), 2),
        "mean_ms": round(statistics.fmean(samples), 2),
        "n": len(samples),
    }


def run(rounds: int, workdir: Path) -> dict[str, Any]:
    python = litellm_python()
    if python is None:
        raise SystemExit("no .venv-litellm: run scripts/test (or set CITEGUARD_LITELLM_PYTHON)")
    policy = workdir / "policy.json"
    policy.write_text(policy_json())
    load_before = os.getloadavg()
    with Servers() as servers, gateway_app() as serve_url:
        config = write_config(
            workdir / "config.yaml",
            upstream=servers.upstream,
            models=["good", "fresh"],
            guardrails=[
                {
                    "guardrail_name": "citeguard",
                    "litellm_params": {
                        "guardrail": CLASS,
                        "mode": "post_call",
                        "default_on": False,
                        "on_fail": "block",
                        "policy": str(policy),
                    },
                },
                {
                    "guardrail_name": "citeguard-api",
                    "litellm_params": {
                        "guardrail": "generic_guardrail_api",
                        "mode": "post_call",
                        "api_base": serve_url,
                        "default_on": False,
                    },
                },
            ],
        )
        with LiteLLMProxy(python, config) as proxy:
            return _measure(rounds, servers, proxy, load_before)


def _measure(
    rounds: int, servers: Servers, proxy: LiteLLMProxy, load_before: tuple[float, ...]
) -> dict[str, Any]:
    from citeguard import Guard, Policy

    headers = {"Authorization": f"Bearer {proxy.key}"}
    client = httpx.Client(base_url=proxy.url, headers=headers, timeout=60)
    runner = asyncio.Runner()
    guard = Guard(Policy.model_validate_json(policy_json()))
    runner.run(guard.warm_up())
    fresh_n = [0]

    def via_proxy(model: str, guardrails: list[str]) -> float:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": QUESTION}],
            "guardrails": guardrails,
        }
        t0 = time.perf_counter()
        r = client.post("/v1/chat/completions", json=body)
        elapsed = (time.perf_counter() - t0) * 1000.0
        if r.status_code != 200:
            raise RuntimeError(f"{guardrails}: HTTP {r.status_code}: {r.text[:300]}")
        return elapsed

    def alone(model: str) -> float:
        content = answers(servers.site)["good"]
        if model == "fresh":
            fresh_n[0] += 1
            content = content.replace("?utm_source", f"?alone={fresh_n[0]}&utm_source")
        answer = completion("good", content, servers.site)
        t0 = time.perf_counter()
        verdict = runner.run(guard.check(answer, question=QUESTION))
        elapsed = (time.perf_counter() - t0) * 1000.0
        if not verdict.passed:
            raise RuntimeError("the benchmark's answer failed the check")
        return elapsed

    contenders = {
        "proxy_alone": lambda m: via_proxy(m, []),
        "proxy_class": lambda m: via_proxy(m, ["citeguard"]),
        "proxy_generic": lambda m: via_proxy(m, ["citeguard-api"]),
        "check_alone": alone,
    }
    names = list(contenders)
    results: dict[str, Any] = {}
    try:
        for regime, model in (("fresh", "fresh"), ("cached", "good")):
            for name in names:  # one untimed warm-up each (imports, connections)
                contenders[name](model)
            samples: dict[str, list[float]] = {n: [] for n in names}
            for i in range(rounds):
                order = names[i % len(names) :] + names[: i % len(names)]
                for name in order:
                    samples[name].append(contenders[name](model))
            added = {
                kind: [w - b for w, b in zip(samples[kind], samples["proxy_alone"], strict=True)]
                for kind in ("proxy_class", "proxy_generic")
            }
            base = statistics.median(samples["proxy_alone"])
            results[regime] = {
                **{n: _stats(s) for n, s in samples.items()},
                "added_by_class": _stats(added["proxy_class"]),
                "added_by_generic": _stats(added["proxy_generic"]),
                "ratio_class_vs_alone_p50": round(
                    statistics.median(samples["proxy_class"]) / base, 3
                ),
                "ratio_generic_vs_alone_p50": round(
                    statistics.median(samples["proxy_generic"]) / base, 3
                ),
            }
    finally:
        runner.run(guard.aclose())
        runner.close()
        client.close()
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "rounds": rounds,
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "answer": "2 sentences, 2 citations of one loopback page (quoted), Chat Completions JSON",
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.rounds, Path(tmp))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["results"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
