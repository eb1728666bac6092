"""Scholarly references through the guard (issue 52): HALLMARK's public dev split, closed world.

Data: ``../shared/data/scholarly/`` (HALLMARK, MIT; its README section 7):
``hallmark_dev_public.jsonl`` (1,119 BibTeX entries, 513 VALID, 606 HALLUCINATED in 14 kinds)
and ``dblp_records.jsonl`` (the 1,008 real papers). Only the entries' BibTeX ``fields`` are
read as input; labels and kinds only score the results (never the ``explanation``,
``subtests`` or ``origin``).

Each entry is rendered, by the renderer here, in seven styles (APA, IEEE, ACM, Chicago
author-date, Vancouver, Nature, BibTeX-like one line), with its DOI as a link where it has one
(``https://doi.org/…`` or ``doi:…`` as the style writes it; its ``url`` field, mostly a dblp.org
record, is left out). Entries go, 30 at a time, into a report's reference list under claims
citing them, checked by ``Guard.check`` (entailment, passages and the other axes off) against
one local aiohttp server on 127.0.0.1 that plays three hosts: a DOI resolver (a DOI a record
holds → a 302 to its landing page; any other → 404), the landing pages (``citation_*`` tags from
the record) and a Crossref-format REST API (``/works/{doi}``, ``/works?query.bibliographic=``:
records ranked by the query's title words, weighted by rarity). The closed world: every real
paper is there and no invented one.

An entry is **detected** when its citation ends ``not_found`` or ``metadata_mismatch``.
Reported per split half (SHA-1 of the entry key: ``tune`` and ``held_out``; rules were tuned
on ``tune`` only), per style and per kind: detection rate, false-positive rate (VALID entries
detected), F1. Beside: HALLMARK's published live-database figures on this split (bibtex-updater
86.5% at 9.2% FP; DOI resolution alone 26.8% at 18.5%): a different measurement (live services,
their gaps), shown for context.

Run: ``python -m benchmarks.bench_scholarly [--styles apa,ieee] [--limit N]`` (writes
``benchmarks/results/scholarly.json``), or in the suite: ``python -m benchmarks --only scholarly``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import html
import json
import math
import re
import socket
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from citeguard import Guard, Policy
from citeguard.models import CitationStatus
from citeguard.parse import parse_answer
from citeguard.web.fetch import StaticResolver

if TYPE_CHECKING:
    from benchmarks.context import Config, Context

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scholarly"
RESULTS = Path(__file__).resolve().parent / "results"
STYLES = ("apa", "ieee", "acm", "chicago", "vancouver", "nature", "bibtex")
DETECTED = frozenset({CitationStatus.NOT_FOUND, CitationStatus.METADATA_MISMATCH})
PER_ANSWER = 30
CROSSREF, RESOLVER, LANDING = "api.crossref.bench", "doi.bench", "papers.bench"
PUBLIC = {
    "bibtex-updater (live databases)": {"detected": 0.865, "false_positive": 0.092},
    "DOI resolution alone (live)": {"detected": 0.268, "false_positive": 0.185},
}
# (style, row) → the citation's reason, when a diagnosis asks for them (main --why)
REASONS: dict[tuple[str, int], str] | None = None
_HOMONYM = re.compile(r"\s\d{4}$")


# ---- the entries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    given: str
    family: str


def people(author: str) -> tuple[list[Person], bool]:
    """A BibTeX author field's names (a DBLP homonym number dropped) and whether it ends with
    ``and others``."""
    names = [n.strip() for n in author.replace("\n", " ").split(" and ") if n.strip()]
    more = bool(names) and names[-1].lower() == "others"
    out = []
    for n in names[:-1] if more else names:
        n = _HOMONYM.sub("", n)
        if "," in n:
            family, _, given = n.partition(",")
        else:
            given, _, family = n.rpartition(" ")
        out.append(Person(given.strip(), family.strip()))
    return out, more


def split_half(key: str) -> str:
    return "tune" if hashlib.sha1(key.encode()).digest()[0] % 2 == 0 else "held_out"


def bare_doi(doi: str) -> str:
    """A DOI as the world keys it: lower case, without an arXiv version (``…v1``)."""
    doi = doi.strip().lower()
    return re.sub(r"(arxiv\.\d{4}\.\d{4,5})v\d+$", r"\1", doi)


def _initials(given: str) -> str:
    return " ".join(p[0] + "." for p in re.split(r"[\s\-]+", given) if p)


def _v_initials(given: str) -> str:
    return "".join(p[0] for p in re.split(r"[\s\-]+", given) if p)


def _join(names: list[str], last: str) -> str:
    """Names as a list: "A", "A and B" ("A, & B" where ``last`` keeps its comma: APA), "A, B,
    and C"."""
    if len(names) <= 1:
        return "".join(names)
    if len(names) == 2 and not last.startswith(", &"):
        return f"{names[0]}{last.removeprefix(',')}{names[1]}"
    return ", ".join(names[:-1]) + f"{last}{names[-1]}"


_LATEX_ACCENT = re.compile(r"\\([`'^\"~vcu=.H])\s?\{?\\?([A-Za-z])\}?")
_COMBINING = {
    "`": "\u0300",
    "'": "\u0301",
    "^": "\u0302",
    '"': "\u0308",
    "~": "\u0303",
    "v": "\u030c",
    "c": "\u0327",
    "u": "\u0306",
    "=": "\u0304",
    ".": "\u0307",
    "H": "\u030b",
}


def unlatex(text: str) -> str:
    """BibTeX text as a person writes it: accents as letters (é for its LaTeX), no braces, no
    HTML entities (the data's titles carry ``&apos;``)."""
    text = html.unescape(text)
    text = _LATEX_ACCENT.sub(lambda m: m.group(2) + _COMBINING[m.group(1)], text)
    text = re.sub(r"\\[A-Za-z]+\s?", "", text).replace("{", "").replace("}", "")
    return unicodedata.normalize("NFC", text)


def render(fields: dict[str, str], style: str) -> str:
    """One entry in one style (BibTeX-like keeps the fields as they are, LaTeX included)."""
    title = unlatex(fields["title"])
    persons, more = people(unlatex(fields["author"]))
    year = fields.get("year", "")
    venue = fields.get("booktitle") or fields.get("journal") or ""
    doi = fields.get("doi")
    etal = " et al." if more else ""
    if style == "bibtex":
        parts = [f"title={{{fields['title']}}}", f"author={{{fields['author']}}}"]
        if fields.get("booktitle"):
            parts.append(f"booktitle={{{fields['booktitle']}}}")
        if fields.get("journal"):
            parts.append(f"journal={{{fields['journal']}}}")
        parts.append(f"year={{{year}}}")
        if doi:
            parts.append(f"doi={{{doi}}}")
        kind = "article" if fields.get("journal") else "inproceedings"
        return f"@{kind}{{ref, {', '.join(parts)}}}"
    link = f" https://doi.org/{doi}" if doi else ""
    if style == "apa":
        names = [f"{p.family}, {_initials(p.given)}" for p in persons]
        au = _join(names, ", & ") + etal
        v = f" In {venue}." if venue else ""
        return f"{au} ({year}). {title}.{v}{link}"
    if style == "ieee":
        names = [f"{_initials(p.given)} {p.family}" for p in persons]
        au = _join(names, ", and ") + etal
        v = f" in Proc. {venue}," if venue else ""
        d = f", doi: {doi}." if doi else "."
        return f'{au}, "{title},"{v} {year}{d}'
    if style == "acm":
        au = _join([f"{p.given} {p.family}" for p in persons], ", and ") + etal
        v = f" In {venue}." if venue else ""
        return f"{au}. {year}. {title}.{v}{link}"
    if style == "chicago":
        first = [f"{persons[0].family}, {persons[0].given}"] if persons else []
        rest = [f"{p.given} {p.family}" for p in persons[1:]]
        au = _join(first + rest, ", and ") + etal
        v = f" In {venue}." if venue else ""
        return f'{au}. {year}. "{title}."{v}{link}'
    if style == "vancouver":
        au = ", ".join(f"{p.family} {_v_initials(p.given)}" for p in persons[:6])
        if len(persons) > 6 or more:
            au += ", et al"
        v = f" In: {venue};" if venue else ""
        d = f" doi:{doi}" if doi else ""
        return f"{au}. {title}.{v} {year}.{d}"
    if style == "nature":
        names = [f"{p.family}, {_initials(p.given)}" for p in persons]
        au = (
            ", ".join(names[:-1]) + f" & {names[-1]}" if len(names) > 1 else "".join(names)
        ) + etal
        v = f" {venue}" if venue else ""
        return f"{au} {title}.{v} ({year}).{link}"
    raise ValueError(style)


# ---- the closed world ------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower().replace("{", "").replace("}", ""))


class World:
    """The real papers, as Crossref items and landing pages, and a title search."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.items: list[dict[str, Any]] = []
        self.by_doi: dict[str, int] = {}
        index: dict[str, set[int]] = defaultdict(set)
        for rec in records:
            f = rec["fields"]
            doi = f.get("doi")
            if doi and bare_doi(doi) in self.by_doi:
                continue  # a paper held twice (README 7.2): one DOI, one record
            persons, _more = people(f["author"])
            arxiv = rec["bibtex_type"] == "misc" or "arxiv" in f.get("note", "").lower()
            item: dict[str, Any] = {
                "DOI": doi or None,
                "title": [f["title"].replace("{", "").replace("}", "")],
                "author": [{"given": p.given, "family": p.family} for p in persons],
                "issued": {"date-parts": [[int(f["year"])]]},
                "container-title": [f["booktitle"]] if f.get("booktitle") else [],
                "type": "posted-content" if arxiv else "proceedings-article",
            }
            k = len(self.items)
            self.items.append(item)
            if doi:
                self.by_doi[bare_doi(doi)] = k
            for w in set(_words(item["title"][0])):
                index[w].add(k)
        self.index = dict(index)
        n = len(self.items)
        self.idf = {w: math.log(n / len(ks)) + 0.1 for w, ks in self.index.items()}

    def search(self, query: str, rows: int) -> list[dict[str, Any]]:
        scores: Counter[int] = Counter()
        for w in set(_words(query)):
            for k in self.index.get(w, ()):
                scores[k] += self.idf[w]  # type: ignore[assignment]
        return [self.items[k] for k, _s in scores.most_common(rows)]

    def landing(self, k: int) -> str:
        item = self.items[k]
        tags = [("citation_title", item["title"][0])]
        tags += [("citation_author", f"{a['family']}, {a['given']}") for a in item["author"]]
        tags.append(("citation_publication_date", str(item["issued"]["date-parts"][0][0])))
        if item["container-title"]:
            tags.append(("citation_conference_title", item["container-title"][0]))
        if item["DOI"]:
            tags.append(("citation_doi", item["DOI"]))
        if item["type"] == "posted-content" and item["DOI"]:
            tags.append(("citation_arxiv_id", item["DOI"].rsplit("arXiv.", 1)[-1]))
        meta = "".join(f'<meta name="{n}" content="{escape(v)}">' for n, v in tags)
        return (
            f"<html><head><title>{escape(item['title'][0])}</title>{meta}</head>"
            f"<body><article><h1>{escape(item['title'][0])}</h1></article></body></html>"
        )


def app(world: World) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").rsplit(":", 1)[0]
        path = request.path
        if host == RESOLVER:
            k = world.by_doi.get(bare_doi(path.lstrip("/")))
            if k is None:
                return web.Response(status=404, text="DOI Not Found")
            raise web.HTTPFound(f"http://{LANDING}:{request.url.port}/paper/{k}")
        if host == LANDING and path.startswith("/paper/"):
            return web.Response(text=world.landing(int(path[7:])), content_type="text/html")
        if host == CROSSREF and path.startswith("/works/"):
            k = world.by_doi.get(bare_doi(path[7:]))
            if k is None:
                return web.Response(status=404, text="Resource not found.")
            return web.json_response({"status": "ok", "message": world.items[k]})
        if host == CROSSREF and path == "/works":
            rows = int(request.query.get("rows", "5"))
            items = world.search(request.query.get("query.bibliographic", ""), rows)
            body = {"status": "ok", "message-type": "work-list", "message": {"items": items}}
            return web.json_response(body)
        return web.Response(status=404, text="no such route")

    a = web.Application()
    a.router.add_route("*", "/{tail:.*}", handle)
    return a


# ---- the run ---------------------------------------------------------------------------------


def load(limit: int | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [json.loads(x) for x in (DATA / "hallmark_dev_public.jsonl").open(encoding="utf-8")]
    recs = [json.loads(x) for x in (DATA / "dblp_records.jsonl").open(encoding="utf-8")]
    if limit is not None:
        step = max(1, len(rows) // limit)
        rows = rows[::step][:limit]
    return rows, recs


def batches(rows: list[dict[str, Any]]) -> Iterator[list[int]]:
    """Row indices, ``PER_ANSWER`` a report, no DOI twice in one report (one URL, one
    citation)."""
    left = list(range(len(rows)))
    while left:
        batch: list[int] = []
        dois: set[str] = set()
        rest: list[int] = []
        for i in left:
            doi = rows[i]["fields"].get("doi")
            key = bare_doi(doi) if doi else None
            if len(batch) < PER_ANSWER and (key is None or key not in dois):
                batch.append(i)
                if key:
                    dois.add(key)
            else:
                rest.append(i)
        yield batch
        left = rest


def policy(port: int) -> Policy:
    return Policy().replace(
        fetch={
            "allowed_private_hosts": frozenset({CROSSREF, RESOLVER, LANDING}),
            "doi_resolver_url": f"http://{RESOLVER}:{port}/",
            "url_timeout": 20.0,
            "answer_deadline": 60.0,
            "per_host_concurrency": 16,
            "soft_404_probe": False,
        },
        scholarly={"crossref_url": f"http://{CROSSREF}:{port}/", "max_lookups": 1000},
        entailment={"check_entailment": False, "backend": "none"},
        passage={"check_passages": False},
        diversity={"enabled": False},
        freshness={"enabled": False},
        query={"enabled": False},
    )


async def run(
    styles: tuple[str, ...] = STYLES,
    limit: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    rows, recs = load(limit)
    world = World(recs)
    runner = web.AppRunner(app(world), access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    port = sock.getsockname()[1]
    resolver = StaticResolver(dict.fromkeys((CROSSREF, RESOLVER, LANDING), "127.0.0.1"))
    outcomes: dict[str, list[str]] = {s: [""] * len(rows) for s in styles}
    t0 = time.perf_counter()
    try:
        async with Guard(policy(port), resolver=resolver) as guard:
            for style in styles:
                for batch in batches(rows):
                    await _check(guard, rows, batch, style, outcomes[style])
                if log is not None:
                    log(f"{style}: {time.perf_counter() - t0:.0f} s")
    finally:
        await runner.cleanup()
    return score(rows, outcomes, time.perf_counter() - t0)


async def _check(
    guard: Guard, rows: list[dict[str, Any]], batch: list[int], style: str, out: list[str]
) -> None:
    claims = " ".join(f"Finding {n} holds [{n}]." for n in range(1, len(batch) + 1))
    refs = "\n".join(f"[{n}] {render(rows[i]['fields'], style)}" for n, i in enumerate(batch, 1))
    text = f"{claims}\n\nReferences\n{refs}\n"
    verdict = await guard.check(text)
    by_url = {c.normalized_url or c.url: c for c in verdict.citations}
    # which URL each entry became (its DOI, an arXiv id it names first, reference:N)
    cited = {c.label: c.normalized_url or c.url for c in parse_answer(text).citations}
    for n, i in enumerate(batch, 1):
        key = cited.get(str(n))
        report = by_url.get(key) if key is not None else None
        out[i] = report.status.value if report is not None else "not_a_citation"
        if REASONS is not None:
            REASONS[(style, i)] = report.reason if report is not None else ""


def _rates(items: list[tuple[bool, bool]]) -> dict[str, Any]:
    """(hallucinated, detected) pairs → detection, false positives, F1."""
    tp = sum(1 for h, d in items if h and d)
    fn = sum(1 for h, d in items if h and not d)
    fp = sum(1 for h, d in items if not h and d)
    tn = sum(1 for h, d in items if not h and not d)
    det = tp / (tp + fn) if tp + fn else None
    fpr = fp / (fp + tn) if fp + tn else None
    prec = tp / (tp + fp) if tp + fp else None
    f1 = 2 * prec * det / (prec + det) if prec and det else None
    r = lambda x: None if x is None else round(x, 4)  # noqa: E731
    return {"n": len(items), "detected": r(det), "false_positive": r(fpr), "f1": r(f1)}


def score(
    rows: list[dict[str, Any]], outcomes: dict[str, list[str]], seconds: float
) -> dict[str, Any]:
    result: dict[str, Any] = {"seconds": round(seconds, 1), "entries": len(rows), "public": PUBLIC}
    for half in ("tune", "held_out", "all"):
        picked = [
            i for i, r in enumerate(rows) if half == "all" or split_half(r["bibtex_key"]) == half
        ]
        pairs = [
            (rows[i]["label"] == "HALLUCINATED", st in {s.value for s in DETECTED}, style, i)
            for style, sts in outcomes.items()
            for i in picked
            for st in [sts[i]]
        ]
        block: dict[str, Any] = {"overall": _rates([(h, d) for h, d, _s, _i in pairs])}
        block["per_style"] = {
            s: _rates([(h, d) for h, d, st, _i in pairs if st == s]) for s in outcomes
        }
        kinds = sorted({rows[i].get("hallucination_type") or "VALID" for i in picked})
        block["per_kind"] = {
            k: _rates(
                [
                    (h, d)
                    for h, d, _s, i in pairs
                    if (rows[i].get("hallucination_type") or "VALID") == k
                ]
            )
            for k in kinds
        }
        block["statuses"] = dict(
            Counter(
                f"{'H' if rows[i]['label'] == 'HALLUCINATED' else 'V'}:{outcomes[s][i]}"
                for s in outcomes
                for i in picked
            ).most_common()
        )
        result[half] = block
    held = result["held_out"]
    result["targets"] = [
        {
            "name": "held-out: hallucinated detected",
            "target": ">= 0.95",
            "value": held["overall"]["detected"],
            "met": (held["overall"]["detected"] or 0) >= 0.95,
        },
        {
            "name": "held-out: real flagged",
            "target": "<= 0.05",
            "value": held["overall"]["false_positive"],
            "met": held["overall"]["false_positive"] is not None
            and held["overall"]["false_positive"] <= 0.05,
        },
        {
            "name": "held-out: every kind detected",
            "target": ">= 0.80",
            "value": min((v["detected"] or 0) for k, v in held["per_kind"].items() if k != "VALID"),
            "met": all(
                (v["detected"] or 0) >= 0.8 for k, v in held["per_kind"].items() if k != "VALID"
            ),
        },
    ]
    return result


async def scenario(cfg: Config, ctx: Context) -> dict[str, Any]:
    """The suite's entry: smoke: 40 entries in two styles; quick: 300 in all styles; full: all."""
    if not (DATA / "hallmark_dev_public.jsonl").is_file():
        return {"skipped": f"no data at {DATA}", "targets": []}
    styles = STYLES if cfg.size != "smoke" else ("apa", "bibtex")
    return await run(styles, cfg.pick(None, 300, 40))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--styles", default=",".join(STYLES))
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--out", default=str(RESULTS / "scholarly.json"))
    args = p.parse_args(argv)
    styles = tuple(s for s in args.styles.split(",") if s)
    res = asyncio.run(run(styles, args.limit, log=lambda m: print(m, file=sys.stderr)))
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    for half in ("tune", "held_out"):
        print(half, json.dumps(res[half]["overall"]))
    print(json.dumps(res["targets"], indent=1))


if __name__ == "__main__":
    main()
