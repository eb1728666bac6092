"""Whole-guard false rejects of verbatim quotes: the ``quotes`` scenario of the benchmark suite.

An agent that quotes a page word for word, with or without an attribution frame, has done
everything right; the guard should accept it. This benchmark serves the real pages of
``shared/data/passages`` over loopback at their own URLs and checks answers built from their
hand-labelled exact quotes (real main-text passages) with :class:`citeguard.Guard`:

* the default :class:`~citeguard.Policy` (entailment on, the default ``local`` backend), and the
  same policy with entailment off; only ``fetch.allow_private_addresses`` differs from the
  defaults (the pages are on 127.0.0.1). In the suite the default backend's model is the
  suite's shared ``LocalEntailer`` (same default ``EntailmentPolicy``, loaded once); run alone,
  the Guard builds it. The smoke size stands the word-overlap entailer in for the model.

Sizes: ``full`` every page and every labelled quote (~300 per template), ``quick`` 40 pages
(seeded) with one quote each, ``smoke`` 4 pages.

Claim templates (every answer cites one page once):

==================  =================================================================  ========
template            answer                                                             expected
==================  =================================================================  ========
``bare``            ``"<quote>" [1].`` + ``Sources: [1] URL``                          accept
``frame``           one attribution frame per page, chosen from the seed (``FRAMES``)   accept
``inline_link``     ``[<page title or domain>](<url>) says "<quote>".``                accept
``unquoted``        ``<quote> [1].`` + ``Sources: [1] URL``: the page's words, no marks  accept
``added_content``   ``The article states that "<quote>", which proves that <made-up>``  reject
``negation_dropped`` a quote that starts right after a negation on the page              flag
==================  =================================================================  ========

Per configuration and template it reports the accepted share (the citation's status is
``ok``), the statuses and reasons of the rejects (top 5), validity warnings on accepted
answers, and a few wrong verdicts as examples. ``negation_dropped`` (one per page, where the
page has one): a labelled quote directly preceded on the page by a negation ("nicht", "not",
"pas", … per the page's guessed language); else the part of a labelled quote after a negation
inside it; else the words after the first negation of the page's extracted main text. It is
*flagged* when the citation is rejected or carries a validity finding. Labelled quotes directly
preceded by a negation are left out of the other templates (they drop it).

The server is a plain aiohttp server on ``127.0.0.1`` (real sockets) that tells pages apart by
the ``Host`` header and the path; a :class:`~citeguard.web.fetch.StaticResolver` sends every
page's host name there. URLs keep their host, path and query; ``https`` becomes ``http`` (the
server speaks no TLS). Five pages have no URL upstream (``hard::<file>``); theirs is made from
the file name (``hard::dw.com.colonial.html`` → ``http://dw.com/colonial``). Bodies go out as
``text/html`` without a charset, so the page's own ``<meta charset>`` (or sniffing) decides, as
for a server that does not say.

Run alone: ``python -m benchmarks.bench_quotes [--quick] [--seed N]`` (prints the tables), or
in the suite: ``python -m benchmarks --quick --only quotes``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web

from benchmarks.context import NOW, QUESTION, Config, Context
from citeguard import Guard
from citeguard.models import CitationStatus, Verdict
from citeguard.policy import EntailmentPolicy, FetchPolicy, Policy
from citeguard.web.fetch import StaticResolver
from citeguard.web.page import extract_page
from citeguard.web.urls import registrable_domain

PASSAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "passages"

# Templates that add nothing to the quote (the target), then the two the guard should catch.
NO_CONTENT = ("bare", "frame", "inline_link", "unquoted")
TEMPLATES = (*NO_CONTENT, "added_content", "negation_dropped")
TARGET_SHARE = 0.98

FRAMES: dict[str, str] = {
    "article_states": 'The article states that "{quote}" [1].',
    "according_to": 'According to the source, "{quote}" [1].',
    "site_reports": '{site} reports: "{quote}" [1].',
    "domain_notes": 'As {domain} notes, "{quote}" [1].',
}

# Unrelated, made-up claims that no page of the data supports.
MADE_UP: tuple[str, ...] = (
    "the city council will double its public transport budget next year",
    "the author won the Nobel Prize in Chemistry in 2019",
    "interest rates in the euro area will fall below zero by March",
    "the company secretly owns three football clubs in South America",
    "the moon landing footage was filmed in a studio in Nevada",
    "coffee consumption doubles the average human life expectancy",
    "the government has banned all electric scooters since 2015",
    "the river will have dried up completely within the next five years",
)

# Negations by language (``lang_guess`` of the data; the data is mostly German). The guard's own
# list (``checks/quoted.py``) is not borrowed, so a language it misses shows up as missed flags.
NEGATIONS: dict[str, frozenset[str]] = {
    "en": frozenset({"not", "never", "no", "cannot", "nor", "neither"}),
    "de": frozenset(
        {"nicht", "nie", "niemals", "kein", "keine", "keinen", "keinem", "keiner", "keines"}
    ),
    "fr": frozenset({"pas", "jamais"}),
    "es": frozenset({"no", "nunca", "jamás"}),
    "pl": frozenset({"nie", "nigdy"}),
    "pt": frozenset({"não", "nunca"}),
}
# a negation word followed by these negates nothing the quote keeps ("not only", "nicht nur")
_NOT_NEGATING_AFTER = frozenset(
    """
    only just merely longer less more doubt matter nur allein mehr einmal erst weniger seulement
    plus solo sólo tylko
    """.split()  # noqa: SIM905
)
_NOT_NEGATING_BEFORE = frozenset({"whether", "or", "if", "ob", "oder"})
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_UNSAFE_QUOTE = re.compile(r'["\[\]\n“”„«»]')
MIN_NEGATION_SUFFIX_WORDS = 4
EXAMPLES_PER_CONFIG = 12


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotePage:
    """One served page: where it lives, what it says, and its labelled exact quotes."""

    file: str
    url: str  # as served (and cited)
    source_url: str  # as labelled upstream
    lang: str
    body: bytes
    title: str | None
    text: str
    main_text: str
    quotes: tuple[str, ...]

    @property
    def host(self) -> str:
        """The URL's host name."""
        return urlsplit(self.url).hostname or ""

    @property
    def domain(self) -> str:
        """The host without ``www.``."""
        return self.host.removeprefix("www.")

    @property
    def site(self) -> str:
        """A site name for "<Site> reports:": the registrable domain's first label,
        capitalised (``www.spiegel.de`` → ``Spiegel``)."""
        first = registrable_domain(self.host).split(".")[0] or self.domain.split(".")[0]
        return first[:1].upper() + first[1:]


def served_url(url: str, file: str) -> str:
    """The URL a page is served and cited at: ``https`` → ``http``, a trailing full stop
    dropped; ``hard::`` rows get one made from the file name."""
    url = url.strip().rstrip(".")  # one upstream URL ends in a stray full stop
    if url.startswith("hard::"):
        stem = file.removesuffix(".html")
        host, sep, rest = stem.partition("-")
        if not sep:
            host, _, rest = stem.rpartition(".")
        return f"http://{host.lower()}/{rest}"
    parts = urlsplit(url)
    query = f"?{parts.query}" if parts.query else ""
    return f"http://{parts.netloc.lower()}{parts.path or '/'}{query}"


def _key(host: str, path_qs: str) -> tuple[str, str]:
    return host.lower().rstrip("."), unquote(path_qs or "/")


def _link_text(page: QuotePage) -> str:
    title = " ".join((page.title or "").split())
    if title and len(title) <= 90 and not re.search(r"[\[\]()\"]", title):
        return title
    return page.domain


def load_quote_pages(limit: int | None, seed: int) -> list[QuotePage]:
    """The pages with at least one usable exact quote (``limit``: a seeded sample of them)."""
    index = PASSAGES / "passages.jsonl"
    rows: dict[str, list[dict[str, Any]]] = {}
    for line in index.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        row = json.loads(line)
        if row["kind"] != "exact" or _UNSAFE_QUOTE.search(row["quote"]):
            continue
        if (PASSAGES / row["file"]).is_file():
            rows.setdefault(row["file"], []).append(row)
    files = sorted(rows)
    if limit is not None and limit < len(files):
        files = sorted(random.Random(f"{seed}|quotes|pages").sample(files, limit))
    pages: list[QuotePage] = []
    seen: set[tuple[str, str]] = set()
    for f in files:
        first = rows[f][0]
        url = served_url(first["url"], f)
        parts = urlsplit(url)
        key = _key(parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))
        if key in seen:  # two files at one URL: keep the first
            continue
        seen.add(key)
        body = (PASSAGES / f).read_bytes()
        page = extract_page(body, url=url, content_type="text/html", date_fallback=False)
        pages.append(
            QuotePage(
                file=f,
                url=url,
                source_url=first["url"],
                lang=first.get("lang_guess") or "",
                body=body,
                title=page.title,
                text=page.text,
                main_text=page.main_text or page.text,
                quotes=tuple(" ".join(r["quote"].split()) for r in rows[f]),
            )
        )
    return pages


class QuoteServer:
    """The pages on ``127.0.0.1:<port>``, told apart by ``Host`` and path (real sockets)."""

    def __init__(self, pages: list[QuotePage]) -> None:
        self.by_key: dict[tuple[str, str], bytes] = {}
        for p in pages:
            parts = urlsplit(p.url)
            path_qs = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            self.by_key[_key(p.host, path_qs)] = p.body
        self.hosts = sorted({p.host for p in pages})
        self.requests = 0
        self.misses: list[str] = []  # requests that got a 404 (the guard's probes among them)
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        host = (request.host or "").split(":", 1)[0]
        body = self.by_key.get(_key(host, request.raw_path))
        if body is None:
            # a real 404 for any other path: a host that served its one page for every path
            # would look like a catch-all ("soft 404") site to the guard
            self.misses.append(f"{host}{request.raw_path}")
            return web.Response(status=404, text="not found")
        return web.Response(body=body, headers={"Content-Type": "text/html"})

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def aclose(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def resolver(self) -> StaticResolver:
        """Every page's host → ``127.0.0.1:PORT``."""
        return StaticResolver({h: f"127.0.0.1:{self.port}" for h in self.hosts})


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One answer to check and what the guard should do with it."""

    template: str
    page: QuotePage
    quote: str
    answer: str
    detail: str = ""  # the frame, the made-up claim, or the dropped negation


def _sources(url: str) -> str:
    return f"\n\nSources:\n[1] {url}\n"


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def _negating(words: list[re.Match[str]], i: int, negations: frozenset[str]) -> bool:
    """Whether ``words[i]`` is a negation that negates what follows it."""
    if words[i].group() not in negations or i + 1 >= len(words):
        return False
    if words[i + 1].group().lower() in _NOT_NEGATING_AFTER:
        return False
    return not (i > 0 and words[i - 1].group().lower() in _NOT_NEGATING_BEFORE)


def preceding_negation(page: QuotePage, quote: str) -> str | None:
    """The negation that stands right before ``quote`` on the page (its first occurrence), or
    ``None``. Such a quote drops it: it is a ``negation_dropped`` case, not a plain one."""
    negations = NEGATIONS.get(page.lang, frozenset())
    text = _normalise(page.text)
    at = text.find(_normalise(quote))
    if at <= 0 or text[at - 1] != " ":
        return None
    before = _WORD.findall(text[max(0, at - 40) : at])
    if not before or before[-1] not in negations:
        return None
    if len(before) >= 2 and before[-2] in _NOT_NEGATING_BEFORE:
        return None
    first = _WORD.findall(quote.lower())[:1]
    return before[-1] if first and first[0] not in _NOT_NEGATING_AFTER else None


def negation_case(page: QuotePage) -> tuple[str, str, str] | None:
    """``(quote, negation, where)``: a verbatim quote of ``page`` that starts right after a
    negation on the page, or ``None``. In order of preference (``where``): ``before_label``, a
    labelled quote directly preceded by a negation; ``in_label``, the part of a labelled quote
    after a negation inside it (at least 4 words left); ``main_text``, the words after the
    first negation of the extracted main text, to the end of their sentence (5 to 15 words)."""
    negations = NEGATIONS.get(page.lang, frozenset())
    text = _normalise(page.text)
    found = [(q, text.find(_normalise(q))) for q in page.quotes]
    found = [(q, at) for q, at in found if at >= 0]
    for q, _at in found:
        word = preceding_negation(page, q)
        if word is not None:
            return q, word, "before_label"
    for q, _at in found:
        words = list(_WORD.finditer(q))
        for i, m in enumerate(words[:-MIN_NEGATION_SUFFIX_WORDS]):
            if not _negating(words, i, negations):
                continue
            suffix = q[m.end() :].lstrip(" ,;:-–—")
            if len(_WORD.findall(suffix)) >= MIN_NEGATION_SUFFIX_WORDS and suffix[:1].isalnum():
                return suffix, m.group().lower(), "in_label"
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", page.main_text):
        words = list(_WORD.finditer(sentence))
        for i, m in enumerate(words):
            if not _negating(words, i, negations) or sentence[m.end() : m.end() + 1] != " ":
                continue
            rest = words[i + 1 : i + 16]
            if len(rest) < 5:
                continue
            quote = sentence[rest[0].start() : rest[-1].end()]
            if not _UNSAFE_QUOTE.search(quote) and _normalise(quote) in _normalise(page.text):
                return quote, m.group().lower(), "main_text"
            break
    return None


def build_cases(pages: list[QuotePage], seed: int, *, all_quotes: bool) -> list[Case]:
    """Every template's answers: one quote per page (``all_quotes``: every labelled quote).
    Labelled quotes directly preceded by a negation on their page are left out of the plain
    templates (they are ``negation_dropped`` cases)."""
    cases: list[Case] = []
    for p in pages:
        rng = random.Random(f"{seed}|quotes|{p.file}")
        # a labelled quote right after a negation on its page drops it: not a plain quote
        plain = [q for q in p.quotes if preceding_negation(p, q) is None]
        if not plain:
            quotes: list[str] = []
        else:
            quotes = plain if all_quotes else [plain[rng.randrange(len(plain))]]
        for k, q in enumerate(quotes):
            qrng = random.Random(f"{seed}|quotes|{p.file}|{k}")
            src = _sources(p.url)
            cases.append(Case("bare", p, q, f'"{q}" [1].' + src))
            frame = sorted(FRAMES)[qrng.randrange(len(FRAMES))]
            sentence = FRAMES[frame].format(quote=q, site=p.site, domain=p.domain)
            cases.append(Case("frame", p, q, sentence + src, detail=frame))
            cases.append(Case("inline_link", p, q, f'[{_link_text(p)}]({p.url}) says "{q}".\n'))
            cases.append(Case("unquoted", p, q, f"{q.rstrip('.!?。 ')} [1]." + src))
            made_up = MADE_UP[qrng.randrange(len(MADE_UP))]
            cases.append(
                Case(
                    "added_content",
                    p,
                    q,
                    f'The article states that "{q}", which proves that {made_up} [1].' + src,
                    detail=made_up,
                )
            )
        neg = negation_case(p)
        if neg is not None:
            q, word, where = neg
            cases.append(
                Case(
                    "negation_dropped",
                    p,
                    q,
                    f'The article states that "{q}" [1].' + _sources(p.url),
                    detail=f"{where}:{word}",
                )
            )
    return cases


# --------------------------------------------------------------------------------------------
# Running the guard
# --------------------------------------------------------------------------------------------


def quote_policy(entailment_on: bool) -> Policy:
    """The default Policy with loopback allowed; entailment as given (``off``: switched off)."""
    fetch = FetchPolicy(allow_private_addresses=True)
    if entailment_on:
        return Policy(fetch=fetch)
    return Policy(fetch=fetch, entailment=EntailmentPolicy(check_entailment=False))


@dataclass
class Outcome:
    """What the guard did with one case."""

    case: Case
    status: str
    reason: str
    warnings: list[str]
    seconds: float

    @property
    def accepted(self) -> bool:
        """The citation's status is ``ok``."""
        return self.status == CitationStatus.OK.value

    @property
    def flagged(self) -> bool:
        """Rejected, or accepted with a validity finding on its URL."""
        return not self.accepted or bool(self.warnings)


def _outcome(case: Case, verdict: Verdict, seconds: float) -> Outcome:
    report = verdict.citations[0] if verdict.citations else None
    if report is None:
        return Outcome(case, "no_citation", "the parser found no citation", [], seconds)
    validity = verdict.axes.get("validity")
    warnings = [
        f.code
        for f in (validity.findings if validity is not None else [])
        if f.url in (report.url, case.page.url) and f.code != report.status.value
    ]
    return Outcome(case, report.status.value, report.reason, warnings, seconds)


def _short(reason: str, limit: int = 110) -> str:
    # reasons embed scores and quotes; cut them so alike reasons tally together
    reason = re.sub(r"\d+(?:\.\d+)?", "#", reason)
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def tally(outcomes: list[Outcome]) -> dict[str, Any]:
    """Per template: answers, accepted share, reject statuses and reasons (top 5)."""
    out: dict[str, Any] = {}
    for template in TEMPLATES:
        rows = [o for o in outcomes if o.case.template == template]
        if not rows:
            out[template] = {"answers": 0}
            continue
        accepted = sum(o.accepted for o in rows)
        flagged = sum(o.flagged for o in rows)
        rejects = [o for o in rows if not o.accepted]
        block: dict[str, Any] = {
            "answers": len(rows),
            "accepted": accepted,
            "accepted_share": round(accepted / len(rows), 4),
            "rejected_share": round(1 - accepted / len(rows), 4),
            "flagged_share": round(flagged / len(rows), 4),
            "accepted_with_warning": sum(1 for o in rows if o.accepted and o.warnings),
            "statuses": dict(Counter(o.status for o in rows).most_common()),
            "top_reject_reasons": [
                {"status_reason": k, "count": v}
                for k, v in Counter(f"{o.status}: {_short(o.reason)}" for o in rejects).most_common(
                    5
                )
            ],
            "warnings": dict(Counter(w for o in rows for w in o.warnings).most_common(5)),
            "ms_median": round(sorted(o.seconds for o in rows)[len(rows) // 2] * 1000, 2),
        }
        if template == "frame":
            by_frame: dict[str, list[Outcome]] = {}
            for o in rows:
                by_frame.setdefault(o.case.detail, []).append(o)
            block["by_frame"] = {
                k: {
                    "answers": len(v),
                    "accepted_share": round(sum(o.accepted for o in v) / len(v), 4),
                }
                for k, v in sorted(by_frame.items())
            }
        if template == "negation_dropped":
            block["negations"] = dict(Counter(o.case.detail for o in rows).most_common())
            block["missed_negations"] = dict(
                Counter(o.case.detail for o in rows if not o.flagged).most_common()
            )
        out[template] = block
    return out


def _examples(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Answers the guard got wrong: rejected no-content quotes first, then missed catches."""
    wrong = [o for o in outcomes if o.case.template in NO_CONTENT and not o.accepted]
    wrong += [o for o in outcomes if o.case.template not in NO_CONTENT and not o.flagged]
    return [
        {
            "template": o.case.template,
            "file": o.case.page.file,
            "url": o.case.page.url,
            "answer": o.case.answer.strip(),
            "status": o.status,
            "reason": o.reason,
            "warnings": o.warnings,
        }
        for o in wrong[:EXAMPLES_PER_CONFIG]
    ]


async def run_config(
    cases: list[Case],
    server: QuoteServer,
    *,
    entailment_on: bool,
    entailer: Any = "default",
    question: str,
    concurrency: int = 4,
) -> dict[str, Any]:
    """Check every case through one Guard; ``entailer="default"``: the Guard builds the one
    its policy names (what a user gets), else the given entailer."""

    policy = quote_policy(entailment_on)
    kwargs: dict[str, Any] = {} if entailer == "default" else {"entailer": entailer}
    backend = None
    if entailment_on:
        backend = (
            f"{policy.entailment.backend}, built by the Guard" if entailer == "default" else None
        )
        backend = backend or type(entailer).__name__
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(concurrency)
    async with Guard(policy, resolver=server.resolver(), now=lambda: NOW, **kwargs) as guard:
        warm_s = time.perf_counter() - t0

        async def one(case: Case) -> Outcome:
            async with sem:
                t = time.perf_counter()
                verdict = await guard.check(case.answer, question=question)
                return _outcome(case, verdict, time.perf_counter() - t)

        outcomes = await asyncio.gather(*(one(c) for c in cases))
    templates = tally(list(outcomes))
    shares = [templates[t]["accepted_share"] for t in NO_CONTENT if templates[t]["answers"]]
    pooled = [o for o in outcomes if o.case.template in NO_CONTENT]
    return {
        "entailment": entailment_on,
        "entailer": backend,
        "warm_up_s": round(warm_s, 2),
        "seconds": round(time.perf_counter() - t0, 2),
        "templates": templates,
        "no_content_accepted_share_min": min(shares) if shares else None,
        "no_content_accepted_share_pooled": round(sum(o.accepted for o in pooled) / len(pooled), 4)
        if pooled
        else None,
        "examples": _examples(list(outcomes)),
    }


async def bench(
    n_pages: int | None,
    *,
    seed: int = 0,
    all_quotes: bool = False,
    configs: tuple[tuple[str, bool, Any], ...] = (
        ("default", True, "default"),
        ("entailment_off", False, None),
    ),
    question: str | None = None,
) -> dict[str, Any]:
    """Serve the pages, build the cases, check them under each ``(name, entailment_on,
    entailer)`` configuration."""

    pages = load_quote_pages(n_pages, seed)
    cases = build_cases(pages, seed, all_quotes=all_quotes)
    server = QuoteServer(pages)
    await server.start()
    results: dict[str, Any] = {}
    try:
        for name, on, entailer in configs:
            results[name] = await run_config(
                cases, server, entailment_on=on, entailer=entailer, question=question or QUESTION
            )
    finally:
        await server.aclose()
    return {
        "source": "shared/data/passages (kind=exact, trafilatura evaldata 'with' segments)",
        "pages": len(pages),
        "quotes_per_page": "all labelled" if all_quotes else "one (seeded)",
        "cases": dict(Counter(c.template for c in cases)),
        "labelled_quotes_after_a_negation": sum(
            preceding_negation(p, q) is not None for p in pages for q in p.quotes
        ),
        "frames": dict(FRAMES),
        "question": question or QUESTION,
        "server": {
            "requests": server.requests,
            "not_found": len(server.misses),
            "not_found_first": server.misses[:10],
        },
        "configs": results,
    }


# --------------------------------------------------------------------------------------------
# The suite scenario and its summary
# --------------------------------------------------------------------------------------------


async def scenario(cfg: Config, ctx: Context) -> dict[str, Any]:
    """``quotes``: every page (full; every labelled quote), 40 pages (quick), 4 pages (smoke,
    with the word-overlap entailer standing in for the model)."""
    if not (PASSAGES / "passages.jsonl").is_file():
        return {"skipped": f"needs {PASSAGES} (the labelled pages)", "targets": []}
    n_pages: int | None = cfg.pick(None, 40, 4)
    # the default backend's model (LocalEntailer with the default EntailmentPolicy), loaded once
    # for the whole suite; the smoke size stands the word-overlap baseline in for it
    on_entailer: Any = ctx.entailer(cfg.pick("local", "local", "word_overlap"))
    res = await bench(
        n_pages,
        seed=cfg.seed,
        all_quotes=cfg.size == "full",
        configs=(("default", True, on_entailer), ("entailment_off", False, None)),
    )
    value = res["configs"]["default"]["no_content_accepted_share_min"]
    res["targets"] = [
        {
            "name": "verbatim quotes accepted (bare/frame/inline), default guard",
            "target": f">= {TARGET_SHARE}",
            "value": value,
            "met": value is not None and value >= TARGET_SHARE,
        }
    ]
    return res


def summary_lines(q: dict[str, Any]) -> list[str]:
    """The SUMMARY.md section of the ``quotes`` scenario."""
    lines = [
        "## Verbatim quotes: whole-guard accepts and rejects",
        "",
        f"{q['pages']} real pages served on loopback at their own URLs, {q['quotes_per_page']} "
        f"labelled exact quote per page; question “{q['question']}”. Accepted = the citation's "
        "status is `ok`. `added_content` should be rejected (its share rejected is the true-reject "
        "rate); `negation_dropped` should be flagged (rejected or warned). Target: ≥ "
        f"{TARGET_SHARE} accepted for bare / frame / inline_link / unquoted "
        "(the lowest of the four).",
        "",
    ]
    head = [
        "config",
        "template",
        "answers",
        "accepted",
        "rejected",
        "flagged",
        "top reject reasons",
    ]
    rows = []
    for name, c in q["configs"].items():
        label = f"{name} ({c['entailer'] or 'no entailer'})"
        for t, b in c["templates"].items():
            if not b.get("answers"):
                continue
            reasons = "; ".join(
                f"{r['status_reason']} ×{r['count']}" for r in b["top_reject_reasons"][:3]
            ).replace("|", "/")
            rows.append(
                [
                    label,
                    t,
                    str(b["answers"]),
                    f"{b['accepted_share']:.3f}",
                    f"{b['rejected_share']:.3f}",
                    f"{b['flagged_share']:.3f}",
                    reasons or "–",
                ]
            )
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    return lines


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="40 pages, one quote each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pages", type=int, default=None, help="this many pages (seeded)")
    parser.add_argument("--off-only", action="store_true", help="entailment off only")
    args = parser.parse_args(argv)
    n = args.pages if args.pages is not None else (40 if args.quick else None)
    configs: tuple[tuple[str, bool, Any], ...] = (("entailment_off", False, None),)
    if not args.off_only:
        configs = (("default", True, "default"), *configs)
    res = asyncio.run(
        bench(n, seed=args.seed, all_quotes=not args.quick and args.pages is None, configs=configs)
    )
    print("\n".join(summary_lines(res)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
