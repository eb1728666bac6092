"""The ``citeguard`` command line: ``check``, ``demo``, ``snapshot``, ``report`` and ``rescore``.

Library errors become usage errors here, at the edge: exit 0 pass, 1 fail, 2 usage error.
Bad input of any kind (an argument, a file that is missing, a directory, unreadable, binary or
not UTF-8) is one line on stderr and exit 2, never a traceback; so is an unexpected exception
(``CITEGUARD_DEBUG=1`` shows its traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import ipaddress
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from citeguard.errors import CiteguardError, InputError
from citeguard.models import SearchRecord, Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy, ScholarlyPolicy
from citeguard.render import render_verdict

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130
DISTRIBUTION = "citeguard-agent"
MAX_TIMEOUT = 3600.0  # seconds: a per-URL timeout above an hour is a typo


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (``citeguard check: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_one_line(message)} (see --help)\n")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def version() -> str:
    """The installed distribution's version (``citeguard-agent``), else the package's own."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        import citeguard

        return str(getattr(citeguard, "__version__", "unknown"))


def _is_address(text: str) -> bool:
    """``ADDR``, ``ADDR:PORT``, ``[V6]``, ``[V6]:PORT`` or a bare IPv6 address (what
    :class:`~citeguard.web.fetch.StaticResolver` takes)."""
    port: str | None = None
    if text.startswith("["):
        addr, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                return False
            port = rest[1:]
    elif text.count(":") == 1:
        addr, port = text.split(":")
    else:
        addr = text
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        return False
    return port is None or (port.isdigit() and 0 < int(port) < 65536)


def _resolve_arg(value: str) -> tuple[str, str]:
    """``HOST:ADDR`` or curl's ``HOST:PORT:ADDR`` (the URL carries the port); ADDR is an IP
    address (IPv6 as ``[::1]`` or ``::1``), optionally with a port of its own to connect to."""
    host, sep, rest = value.partition(":")
    if not sep or not host.strip() or not rest:
        raise argparse.ArgumentTypeError(f"expected HOST:ADDR or HOST:PORT:ADDR, got {value!r}")
    m = re.fullmatch(r"(\d{1,5}):(.+)", rest)
    for addr in [m.group(2), rest] if m else [rest]:
        if _is_address(addr):
            if m and addr == m.group(2) and not 0 < int(m.group(1)) < 65536:
                raise argparse.ArgumentTypeError(f"{m.group(1)} is not a port (in {value!r})")
            return host, addr
    addr = m.group(2) if m else rest
    raise argparse.ArgumentTypeError(
        f"{addr!r} is not an IP address (in {value!r}; expected HOST:ADDR or HOST:PORT:ADDR, "
        "e.g. news.example.com:127.0.0.1)"
    )


def _timeout_arg(value: str) -> float:
    """A per-URL timeout: a finite number of seconds, above 0 and at most an hour."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a number of seconds above 0 and at most {MAX_TIMEOUT:g}"
        )
    return seconds


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="citeguard", description=__doc__)
    p.add_argument("--version", action="version", version=f"citeguard {version()}")
    sub = p.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("check", help="check the citations of an answer (FILE, or - for stdin)")
    c.add_argument("file")
    c.add_argument("--question", "-q", default="", help="the user's question")
    c.add_argument("--json", action="store_true", help="print the verdict as JSON")
    c.add_argument(
        "--claims",
        action="store_true",
        help="print the per-claim view under the citation table: support label, P(supported), "
        "backend, evidence window and link, whether the claim gated",
    )
    c.add_argument(
        "--resolve",
        action="append",
        type=_resolve_arg,
        default=[],
        metavar="HOST:ADDR",
        help="map a host name to an address, like curl --resolve (repeatable); other hosts "
        "resolve as usual",
    )
    c.add_argument("--allow-private", action="store_true", help="allow private/loopback addresses")
    c.add_argument(
        "--crossref-url",
        metavar="URL",
        default=None,
        help="the Crossref REST API root scholarly references are looked up in (a mirror; "
        "default https://api.crossref.org/)",
    )
    c.add_argument(
        "--arxiv-api-url",
        metavar="URL",
        default=None,
        help="the arXiv API root (default https://export.arxiv.org/api/)",
    )
    c.add_argument(
        "--crossref-mailto",
        metavar="ADDRESS",
        default=None,
        help="a contact address sent to Crossref (its polite pool)",
    )
    c.add_argument(
        "--doi-resolver-url",
        metavar="URL",
        default=None,
        help="where doi.org URLs are fetched from (a DOI resolver mirror; default https://doi.org/)",
    )
    c.add_argument(
        "--timeout",
        type=_timeout_arg,
        default=None,
        metavar="SECONDS",
        help=f"per-URL timeout in seconds (above 0, at most {MAX_TIMEOUT:g})",
    )
    c.add_argument(
        "--searches",
        metavar="FILE",
        default=None,
        help="the agent's searches as JSON (- for stdin), for the query axis and retrieval: a "
        "search API response (Tavily, Exa, Brave, SerpAPI, Serper, ...), a list of them, a list "
        'of {"query": ..., "results": [...]}, or a list of query strings',
    )
    c.add_argument(
        "--entailment",
        choices=["auto", "local", "word_overlap", "none"],
        default="auto",
        help="claim-support backend (default: auto, the local model shipped in the package; "
        "word overlap, which the output says, only if its runtime is missing; 'none' skips it)",
    )

    d = sub.add_parser("demo", help="replay the bundled scenario (offline)")
    d.add_argument("--json", action="store_true")
    d.add_argument("--live", action="store_true", help="serve the demo site on 127.0.0.1 instead")
    d.add_argument("--record", metavar="PATH", help="record a new snapshot of the demo to PATH")

    s = sub.add_parser("snapshot", help="list | show | diff | prune snapshot versions")
    s.add_argument("args", nargs=argparse.REMAINDER)

    r = sub.add_parser(
        "report",
        help="per-axis failure rates over logged cases (JSONL, one GuardResult.to_case() a line)",
    )
    r.add_argument("file", help="the JSONL log (README: The traffic report and its input)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument(
        "--html", metavar="PATH", help="also write the report as one self-contained HTML page"
    )
    r.add_argument(
        "--worst",
        type=_count_arg,
        default=10,
        metavar="N",
        help="failing answers the report keeps in full (default: 10)",
    )

    sv = sub.add_parser(
        "serve",
        help="the guard as an HTTP service: check API, guarded OpenAI/Anthropic proxy "
        "(extra: serve)",
    )
    from citeguard.serve.main import add_arguments

    add_arguments(sv)

    rs = sub.add_parser(
        "rescore",
        help="re-run the gate over logged cases with a policy: new cases and what moved",
    )
    rs.add_argument("file", help="the JSONL log (one GuardResult.to_case() a line)")
    rs.add_argument(
        "--policy",
        required=True,
        metavar="FILE",
        help="the Policy as JSON (as Policy.model_dump_json() writes it; keys left out keep "
        "their defaults)",
    )
    rs.add_argument("--out", metavar="PATH", help="the new cases (default: FILE.rescored.jsonl)")
    rs.add_argument("--diff", metavar="PATH", help="what moved, as JSON (default: OUT.diff.json)")
    rs.add_argument("--engine", choices=["inprocess", "ray"], default="inprocess")
    rs.add_argument(
        "--workers",
        type=_positive_arg,
        default=None,
        metavar="N",
        help="Ray workers (--engine ray only; default: 2)",
    )
    rs.add_argument(
        "--concurrency",
        type=_positive_arg,
        default=8,
        metavar="N",
        help="cases checked at once per worker (default: 8)",
    )
    rs.add_argument(
        "--live", action="store_true", help="check the cases that have no snapshot live"
    )
    rs.add_argument(
        "--store",
        metavar="LOCATION",
        help="the snapshot store to replay from (a SQLite path or redis:// URL) instead of the "
        "one each case names, and for cases that name none",
    )
    rs.add_argument("--json", action="store_true", help="print the summary as JSON")
    return p


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status. Bad input never ends in a traceback:
    every error is one line on stderr and exit 2 (``CITEGUARD_DEBUG=1`` re-raises unexpected
    exceptions, for a bug report)."""
    try:
        return _main(argv, out=out)
    except KeyboardInterrupt:
        print("citeguard: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CiteguardError as e:
        print(f"citeguard: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:
        if os.environ.get("CITEGUARD_DEBUG"):
            raise
        print(
            f"citeguard: error: {_one_line(e) or type(e).__name__} ({type(e).__name__}; "
            "CITEGUARD_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_USAGE


def _main(argv: Sequence[str] | None, *, out: TextIO | None) -> int:
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["snapshot"]:
        # its own argparse: options may come before the verb (snapshot --store X list)
        from citeguard.snapshot_cli import snapshot_main

        try:
            return snapshot_main(argv[1:], out=out)
        except CiteguardError as e:
            print(f"citeguard: error: {_one_line(e)}", file=sys.stderr)
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
            return _report(args, out)
        if args.cmd == "rescore":
            return _rescore(args, out)
        if args.cmd == "serve":
            from citeguard.serve.main import serve_main

            return serve_main(args)
    except CiteguardError as e:
        print(f"citeguard: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_USAGE  # pragma: no cover


def _check(args: argparse.Namespace, out: TextIO) -> int:
    from citeguard.guard import Guard
    from citeguard.web.fetch import StaticResolver, SystemResolver

    if args.file == "-" and args.searches == "-":
        raise InputError("the answer and --searches cannot both be - (stdin)")
    answer = _answer_of(_text_of(_read_input(args.file), _name(args.file)))
    searches = None
    if args.searches is not None:
        name = _name(args.searches)
        searches = _searches_of(_text_of(_read_input(args.searches), name), name)
    fetch_kwargs: dict[str, object] = {"allow_private_addresses": args.allow_private}
    if args.timeout is not None:
        fetch_kwargs["url_timeout"] = args.timeout
        fetch_kwargs["answer_deadline"] = max(args.timeout * 2, 20.0)
    if args.doi_resolver_url is not None:
        fetch_kwargs["doi_resolver_url"] = args.doi_resolver_url
    scholarly = {
        key: value
        for key, value in (
            ("crossref_url", args.crossref_url),
            ("arxiv_api_url", args.arxiv_api_url),
            ("crossref_mailto", args.crossref_mailto),
        )
        if value is not None
    }
    policy = Policy(
        fetch=FetchPolicy.model_validate(fetch_kwargs),
        entailment=EntailmentPolicy(
            backend=args.entailment, check_entailment=args.entailment != "none"
        ),
        scholarly=ScholarlyPolicy.model_validate(scholarly),
    )

    async def go() -> Verdict:
        # like curl's --resolve: the hosts named go where they are mapped, every other host to
        # the system's resolver, as without the option
        system = SystemResolver(ttl=policy.fetch.dns_cache_ttl) if args.resolve else None
        resolver = StaticResolver(dict(args.resolve), fallback=system) if system else None
        try:
            async with Guard(policy, resolver=resolver) as guard:
                return await guard.check(answer, question=args.question, searches=searches)
        finally:
            if system is not None:
                await system.aclose()

    verdict = asyncio.run(go())
    if args.json:
        # the word first (the one vocabulary: passed / rejected), then the Verdict's JSON
        body = {"verdict": verdict.verdict_word, **verdict.model_dump(mode="json")}
        out.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(render_verdict(verdict, claims=args.claims))
    return EXIT_PASS if verdict.passed else EXIT_FAIL


def _name(arg: str) -> str:
    return "stdin" if arg == "-" else arg


def _read_input(arg: str) -> bytes:
    """The bytes of FILE (``-``: stdin); a missing, directory or unreadable one is an
    :class:`InputError` naming it."""
    if arg == "-":
        return sys.stdin.buffer.read()
    path = Path(arg)
    try:
        if path.is_dir():
            raise InputError(f"{arg} is a directory, not a file")
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such file: {arg}") from None
    except PermissionError:
        raise InputError(f"cannot read {arg}: permission denied") from None
    except OSError as e:  # a dangling link, a device that refuses, an I/O error
        raise InputError(f"cannot read {arg}: {e.strerror or e}") from None


def _text_of(data: bytes, name: str) -> str:
    """UTF-8 text (a BOM is dropped); binary data or another encoding is an InputError."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{name} is UTF-16 text; save it as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(f"{name} looks binary (a NUL byte at offset {nul}), not UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{name} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "save it as UTF-8"
        ) from None


def _answer_of(text: str) -> Any:
    """The answer in a file: JSON (a structured ``[{claim, url, quote}]`` list, or a provider's
    response object) when it parses as a JSON array or object, else text. An empty file is
    text with no citations, which fails the gate."""
    if text.lstrip()[:1] in ("[", "{"):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list | dict):
            return parsed
    return text


def _searches_of(text: str, name: str) -> list[SearchRecord]:
    """The searches in a ``--searches`` file (see its help); no search in it is an InputError."""
    from citeguard.search import as_search_records

    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{name}: not JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deeply") from None
    records = as_search_records(data) if isinstance(data, list | dict) else []
    if not records:
        raise InputError(
            f"{name}: no searches in it (expected a search API response, a list of them, "
            'a list of {"query": ..., "results": [...]}, or a list of query strings)'
        )
    return records


def _count_arg(value: str) -> int:
    """A whole number of zero or more (``report --worst``)."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return n


def _report(args: argparse.Namespace, out: TextIO) -> int:
    """``citeguard report``: bad lines are skipped and counted (a warning line on stderr); a
    file that is no log, or holds no readable case, is one error line and exit 2."""
    from citeguard.report import render_report, report_file

    path = Path(args.file)
    html_path = Path(args.html) if args.html else None
    if html_path is not None and html_path.is_dir():
        print(f"citeguard: error: --html {html_path} is a directory", file=sys.stderr)
        return EXIT_USAGE
    report = report_file(path, worst=args.worst, progress=sys.stderr)
    if report.cases == 0 and report.skipped_count:
        first = report.skipped[0] if report.skipped else ""
        print(
            f"citeguard: error: {path}: no case could be read "
            f"({report.skipped_count} skipped; {first})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if report.skipped_count:
        first = report.skipped[0] if report.skipped else ""
        print(
            f"citeguard: warning: {path}: skipped {report.skipped_count} of "
            f"{report.cases + report.skipped_count} lines ({first})",
            file=sys.stderr,
        )
    if html_path is not None:
        from citeguard.report_html import render_html

        try:
            html_path.write_text(render_html(report, source=path.name), encoding="utf-8")
        except OSError as e:
            print(f"citeguard: error: cannot write {html_path}: {e.strerror or e}", file=sys.stderr)
            return EXIT_USAGE
    if args.json:
        out.write(report.model_dump_json(indent=2) + "\n")
    else:
        out.write(render_report(report) + "\n")
    return EXIT_PASS


_MAX_WORKERS = 256  # --workers and --concurrency above this are typos


def _positive_arg(value: str) -> int:
    """A whole number from 1 to 256 (``rescore --workers``, ``--concurrency``)."""
    n = _count_arg(value)
    if not 1 <= n <= _MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"expected 1 to {_MAX_WORKERS}, got {n}")
    return n


def _rescore(args: argparse.Namespace, out: TextIO) -> int:
    """``citeguard rescore``: a bad policy file, an unreadable log or an output that cannot be
    written is one error line and exit 2; bad lines are skipped and counted (one warning line);
    a log of which no case could be rescored is exit 2 with the first reason."""
    from citeguard.rescore import render_summary, rescore_file

    if args.workers is not None and args.engine != "ray":
        raise InputError("--workers needs --engine ray")
    name = _name(args.policy)
    text = _text_of(_read_input(args.policy), name)
    try:
        policy = Policy.model_validate_json(text)
    except CiteguardError as e:  # a PolicyError: pydantic's first problem, in one line
        raise InputError(f"{name}: not a policy ({_one_line(e)})") from None
    src = Path(args.file)
    dst = Path(args.out) if args.out else src.with_name(src.name + ".rescored.jsonl")
    diff = (
        Path(args.diff)
        if args.diff
        else dst.with_name(dst.name.removesuffix(".jsonl") + ".diff.json")
    )
    summary = rescore_file(
        src,
        policy,
        out=dst,
        diff=diff,
        engine=args.engine,
        workers=args.workers or 2,
        concurrency=args.concurrency,
        live=args.live,
        store=args.store,
        progress=sys.stderr,
        quiet=True,
    )
    first = summary.skipped[0] if summary.skipped else ""
    if summary.lines and not summary.rescored:
        print(
            f"citeguard: error: {src}: no case could be rescored "
            f"({summary.skipped_count} skipped; {first})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if summary.skipped_count:
        print(
            f"citeguard: warning: {src}: {summary.skipped_count} of {summary.lines} lines not "
            f"rescored ({first})",
            file=sys.stderr,
        )
    if args.json:
        out.write(summary.model_dump_json(indent=2) + "\n")
    else:
        out.write(render_summary(summary) + f"\nwrote {dst} and {diff}\n")
    return EXIT_PASS


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
