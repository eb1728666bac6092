"""The ``citeguard`` command line: ``check``, ``demo``, ``snapshot`` and ``report``.

Library errors become usage errors here, at the edge: exit 0 pass, 1 fail, 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from citeguard.errors import CiteguardError
from citeguard.models import Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy
from citeguard.render import render_verdict

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _resolve_arg(value: str) -> tuple[str, str]:
    """``HOST:ADDR`` or curl's ``HOST:PORT:ADDR`` (the URL carries the port)."""
    host, sep, rest = value.partition(":")
    m = re.fullmatch(r"\d{1,5}:(.+)", rest)
    addr = m.group(1) if m else rest
    if not sep or not host or not addr:
        raise argparse.ArgumentTypeError(f"expected HOST:ADDR or HOST:PORT:ADDR, got {value!r}")
    return host, addr


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="citeguard", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("check", help="check the citations of an answer (FILE, or - for stdin)")
    c.add_argument("file")
    c.add_argument("--question", "-q", default="", help="the user's question")
    c.add_argument("--json", action="store_true", help="print the verdict as JSON")
    c.add_argument(
        "--resolve",
        action="append",
        type=_resolve_arg,
        default=[],
        metavar="HOST:ADDR",
        help="map a host name to an address, like curl --resolve (repeatable)",
    )
    c.add_argument("--allow-private", action="store_true", help="allow private/loopback addresses")
    c.add_argument("--timeout", type=float, default=None, help="per-URL timeout in seconds")
    c.add_argument(
        "--entailment",
        choices=["local", "none"],
        default="local",
        help="entailment backend (default: local; 'none' skips it)",
    )

    d = sub.add_parser("demo", help="replay the bundled scenario (offline)")
    d.add_argument("--json", action="store_true")
    d.add_argument("--live", action="store_true", help="serve the demo site on 127.0.0.1 instead")
    d.add_argument("--record", metavar="PATH", help="record a new snapshot of the demo to PATH")

    s = sub.add_parser("snapshot", help="list | show | diff | prune snapshot versions")
    s.add_argument("args", nargs=argparse.REMAINDER)

    r = sub.add_parser("report", help="per-axis failure rates over logged cases (JSONL)")
    r.add_argument("file")
    return p


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    # the CLI's own output is the table; model-loading progress bars would only clutter stderr
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["snapshot"]:
        # its own argparse: options may come before the verb (snapshot --store X list)
        from citeguard.snapshot_cli import snapshot_main

        try:
            return snapshot_main(argv[1:], out=out)
        except CiteguardError as e:
            print(f"citeguard: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    try:
        if args.cmd == "check":
            return _check(args, out)
        if args.cmd == "demo":
            from citeguard.demo import run_demo

            return run_demo(out=out, as_json=args.json, live=args.live, record=args.record)
        if args.cmd == "report":
            return _report(Path(args.file), out)
    except CiteguardError as e:
        print(f"citeguard: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_USAGE  # pragma: no cover


def _check(args: argparse.Namespace, out: TextIO) -> int:
    from citeguard.guard import Guard
    from citeguard.web.fetch import StaticResolver

    if args.file == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(args.file)
        if not path.is_file():
            print(f"citeguard: error: no such file: {path}", file=sys.stderr)
            return EXIT_USAGE
        data = path.read_bytes()
    answer = _answer_of(data)
    fetch_kwargs: dict[str, object] = {"allow_private_addresses": args.allow_private}
    if args.timeout is not None:
        fetch_kwargs["url_timeout"] = args.timeout
        fetch_kwargs["answer_deadline"] = max(args.timeout * 2, 20.0)
    policy = Policy(
        fetch=FetchPolicy.model_validate(fetch_kwargs),
        entailment=EntailmentPolicy(
            backend=args.entailment, check_entailment=args.entailment != "none"
        ),
    )
    resolver = StaticResolver(dict(args.resolve)) if args.resolve else None

    async def go() -> Verdict:
        async with Guard(policy, resolver=resolver) as guard:
            return await guard.check(answer, question=args.question)

    verdict = asyncio.run(go())
    if args.json:
        out.write(verdict.model_dump_json(indent=2) + "\n")
    else:
        out.write(render_verdict(verdict))
    return EXIT_PASS if verdict.passed else EXIT_FAIL


def _answer_of(data: bytes) -> Any:
    """The answer in a file: JSON (a structured ``[{claim, url, quote}]`` list, or a provider's
    response object) when it parses as a JSON array or object, else text. An empty or binary
    file is text with no citations, which fails the gate."""
    head = data.lstrip()[:1]
    if head in (b"[", b"{"):
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list | dict):
            return parsed
    if b"\x00" in data[:8192]:
        print("citeguard: warning: the answer file looks binary", file=sys.stderr)
    return data.decode("utf-8", errors="replace")


def _report(path: Path, out: TextIO) -> int:
    from citeguard.report import build_report, render_report

    if not path.is_file():
        print(f"citeguard: error: no such file: {path}", file=sys.stderr)
        return EXIT_USAGE
    cases = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(json.loads(line))
        except json.JSONDecodeError as e:
            print(f"citeguard: error: {path}:{n}: not JSON ({e.msg})", file=sys.stderr)
            return EXIT_USAGE
    out.write(render_report(build_report(cases)) + "\n")
    return EXIT_PASS


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
