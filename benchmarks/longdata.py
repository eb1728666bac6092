"""Long-page development sets for claim support (issue 42), read from ``../shared/data``.

Four sets, each row a dict with the same fields (:func:`load_sets`; nothing is copied into the
repository, and a missing data folder gives no rows):

* ``wice``: WiCE claims and sub-claims (``claims/wice_train.jsonl``) with the full text of the
  article they cite; the page's title, author and date come from the file's ``(meta data)``
  lines. Kind ``whole_page``.
* ``expertqa``: ExpertQA pool claims (``claims/expertqa_pool_train.jsonl``) with the web
  passage(s) they cite (snippets of at most 3 kB). Kind ``short_passage``.
* ``ab_long``: every AttributionBench dev pair (``claims/attributionbench_dev.jsonl``) with its
  evidence placed inside the main text of a real page of ``passages/`` (English pages by
  default), at a seeded random paragraph boundary. Kind ``whole_page``.
* ``ab_short``: the same pairs with their own (short) evidence only. Kind ``short_passage``.

Fields of a row: ``id`` (unique over the sets), ``set``, ``kind``, ``claim`` (citation markers
removed), ``y`` (1: supported under the file's strict binarisation), ``group`` (rows that share
a source question, WiCE article or AB question share it; ExpertQA pool and AB rows of one
question share one), ``split`` (``dev`` or ``held_out``), ``fold`` (0-4, a function of the
group), ``model_trained_on`` (the shipped support model was fitted on this row's pair:
``training/train_support.py`` fits on all WiCE rows, the ExpertQA pool rows whose question is
not in the AB held-out half, and the AB tune half), ``subset``, ``page`` (:class:`PageSpec`)
and ``evidence_chars``; WiCE rows add ``oracle_evidence``, the lines of the first set the
annotators marked as together supporting the claim (the retrieval a perfect finder would do).

**Split.** AttributionBench rows keep the split every support benchmark uses (sha1 of the id:
even = tune, odd = held out; ``training.support_data.load_rows``), so the held-out half stays the
one no model, calibration or band saw; it is a split by row, so ``question_in_dev`` marks the
held-out rows whose question has dev rows too. WiCE and ExpertQA pool rows are split by group:
``fold = sha1("longdata|" + group) % 5``, fold 0 held out. Every dev row's ``fold`` is what the
out-of-fold band choice (:mod:`benchmarks.bench_longpage`) groups by.
"""

from __future__ import annotations

import hashlib
import html
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
CLAIMS = DATA / "claims"
PASSAGES = DATA / "passages"
SEED = 42
FOLDS = 5
HELD_OUT_FOLD = 0
SETS = ("wice", "expertqa", "ab_long", "ab_short")
KINDS = ("short_passage", "whole_page")
SET_KIND = {
    "wice": "whole_page",
    "expertqa": "short_passage",
    "ab_long": "whole_page",
    "ab_short": "short_passage",
}
_META = re.compile(r"^\(meta data\) ([A-Z ]+): ?(.*)$")


def _sha(text: str) -> int:
    return int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)


def group_fold(group: str) -> int:
    """The fold (0..4) of a group: a pure function of it."""
    return _sha(f"longdata|{group}") % FOLDS


@dataclass(frozen=True)
class PageSpec:
    """What a row's page shows: title, metadata, and blocks of text (``("h1" | "h2" | "p",
    text)``, in order)."""

    title: str
    blocks: tuple[tuple[str, str], ...]
    host: str = ""
    author: str | None = None
    published: str | None = None  # as the source gives it (ISO-like)
    site_name: str | None = None
    meta: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """The page's visible text, one block a line (what the entailer alone is given)."""
        return "\n".join([self.title, *(t for _, t in self.blocks)])

    def html(self) -> bytes:
        """The page as HTML: head metadata, then an article of headings and paragraphs."""
        e = html.escape
        head = [f"<title>{e(self.title)}</title>"]
        if self.author:
            head.append(f'<meta name="author" content="{e(self.author)}">')
        if self.published:
            head.append(f'<meta property="article:published_time" content="{e(self.published)}">')
        if self.site_name:
            head.append(f'<meta property="og:site_name" content="{e(self.site_name)}">')
        body = "".join(f"<{tag}>{e(text)}</{tag}>\n" for tag, text in self.blocks)
        return (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            + "".join(head)
            + f"</head><body><article>\n{body}</article></body></html>"
        ).encode()


def _lines(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _title_from_url(url: str | None) -> tuple[str, str]:
    """(host, a title made of the URL's last path words) — no words of the claim or question."""
    parts = urlsplit(url or "")
    host = (parts.hostname or "").lower().removeprefix("www.")
    slug = [s for s in (parts.path or "").split("/") if s]
    words = re.sub(r"\.[a-z]{2,5}$", "", slug[-1]) if slug else ""
    words = re.sub(r"[-_+]+", " ", words).strip()
    if not re.search(r"[A-Za-z]{3}", words):
        words = ""
    title = words.capitalize() if words else "Article"
    return host, (f"{title} | {host}" if host else title)


def _paragraphs(evidence: str) -> list[tuple[str, str]]:
    return [("p", p.strip()) for p in re.split(r"\n+", evidence) if p.strip()]


#: AttributionBench's citation markers and separators in a claim (bench_support_bands too)
CLAIM_MARKERS = re.compile(r"\s*(?:\[\d+\])+|</s>")


def _clean_claim(claim: str) -> str:
    return CLAIM_MARKERS.sub("", claim).strip()


def wice_page(evidence: str) -> PageSpec:
    """A WiCE row's page: ``(meta data)`` lines → title / author / date, ``# `` lines →
    headings, every other line a paragraph."""
    meta: dict[str, str] = {}
    blocks: list[tuple[str, str]] = []
    for line in evidence.split("\n"):
        m = _META.match(line.strip())
        if m:
            meta[m.group(1).strip()] = m.group(2).strip()
        elif line.startswith("#"):
            blocks.append(("h2", line.lstrip("#").strip()))
        elif line.strip():
            blocks.append(("p", line.strip()))
    title = meta.get("TITLE") or next((t for tag, t in blocks if tag == "h2"), "Article")
    return PageSpec(
        title=title,
        blocks=(("h1", title), *blocks),
        author=meta.get("AUTHOR") or None,
        published=(meta.get("PUBLISHED DATETIME") or "").replace(" ", "T") or None,
        meta=meta,
    )


@dataclass(frozen=True)
class HostPage:
    """A real page's title and main-text paragraphs (``passages/``), a long page's body."""

    file: str
    title: str
    paragraphs: tuple[str, ...]


@cache
def host_files(lang: str | None = "en") -> tuple[str, ...]:
    """The page files of ``passages/`` (in ``lang`` by the data's guess; None: all), by name;
    empty without the folder."""
    index = PASSAGES / "passages.jsonl"
    if not index.is_file():
        return ()
    rows = _lines(index)
    return tuple(sorted({r["file"] for r in rows if lang is None or r.get("lang_guess") == lang}))


@cache
def host_page(file: str) -> HostPage | None:
    """A page of ``passages/`` with its main text as citeguard extracts it (paragraphs of at
    least 40 characters); None when it has under 1,500 characters of them."""
    from citeguard.web.page import extract_page

    page = extract_page((PASSAGES / file).read_bytes(), url=f"http://pages.test/{file}")
    text = page.main_text or ""
    paras = tuple(p.strip() for p in text.split("\n") if len(p.strip()) >= 40)
    if sum(len(p) for p in paras) < 1500:
        return None
    return HostPage(file, (page.title or file).strip(), paras)


@cache
def host_pages(lang: str | None = "en") -> tuple[HostPage, ...]:
    """:func:`host_page` of every :func:`host_files` page that has one, longest first."""
    out = [h for h in map(host_page, host_files(lang)) if h is not None]
    out.sort(key=lambda h: (-sum(map(len, h.paragraphs)), h.file))
    return tuple(out)


def ab_long_page(
    row_id: str, title: str, evidence: str, hosts: Sequence[HostPage], host: str = ""
) -> PageSpec:
    """``evidence`` placed among a host page's paragraphs at a seeded paragraph boundary (never
    first: the evidence is not the lead), the host page's title as a section heading."""
    rng = random.Random(f"{SEED}|ab_long|{row_id}")
    hp = hosts[rng.randrange(len(hosts))]
    at = rng.randint(1, len(hp.paragraphs))
    paras = list(hp.paragraphs)
    blocks: list[tuple[str, str]] = [("h1", title), ("h2", hp.title)]
    blocks += [("p", p) for p in paras[:at]]
    blocks += _paragraphs(evidence)
    blocks += [("p", p) for p in paras[at:]]
    return PageSpec(title=title, blocks=tuple(blocks), host=host, meta={"host_page": hp.file})


def _row(
    set_name: str,
    r: dict[str, Any],
    page: PageSpec,
    *,
    group: str,
    split: str,
    model_trained_on: bool,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": f"{set_name}:{r['id']}",
        "set": set_name,
        "kind": SET_KIND[set_name],
        "claim": _clean_claim(r["claim"]),
        "y": int(r["label"] == "supported"),
        "group": group,
        "fold": group_fold(group),
        "split": split,
        "model_trained_on": model_trained_on,
        "subset": r.get("subset", set_name),
        "page": page,
        "evidence_chars": len(page.text()),
        **extra,
    }


def _ab_split(row_id: str) -> str:
    """train_support's AB split: sha1(id) even → dev (its tune half), odd → held out."""
    return "dev" if int(hashlib.sha1(row_id.encode()).hexdigest(), 16) % 2 == 0 else "held_out"


def load_sets(
    names: Sequence[str] = SETS, *, lang: str | None = "en"
) -> dict[str, list[dict[str, Any]]]:
    """The named sets' rows (see the module doc); a set whose file is absent is empty."""
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    ab_path = CLAIMS / "attributionbench_dev.jsonl"
    ab = list(_lines(ab_path)) if ab_path.is_file() else []
    ab_held_q = {r["question"].strip() for r in ab if _ab_split(r["id"]) == "held_out"}
    ab_dev_q = {r["question"].strip() for r in ab if _ab_split(r["id"]) == "dev"}
    if "wice" in names and (CLAIMS / "wice_train.jsonl").is_file():
        for r in _lines(CLAIMS / "wice_train.jsonl"):
            g = "wice:" + r["group"]
            split = "held_out" if group_fold(g) == HELD_OUT_FOLD else "dev"
            page = wice_page(r["evidence"])
            lines = r["evidence"].split("\n")
            first = (r.get("supporting_line_sets") or [[]])[0]
            oracle = "\n".join(lines[i] for i in first if 0 <= i < len(lines)) or None
            out["wice"].append(
                _row(
                    "wice",
                    r,
                    page,
                    group=g,
                    split=split,
                    model_trained_on=True,
                    oracle_evidence=oracle,
                )
            )
    if "expertqa" in names and (CLAIMS / "expertqa_pool_train.jsonl").is_file():
        for r in _lines(CLAIMS / "expertqa_pool_train.jsonl"):
            q = r["question"].strip()
            g = "question:" + q
            split = "held_out" if group_fold(g) == HELD_OUT_FOLD else "dev"
            host, title = _title_from_url(next(iter(r.get("urls") or []), None))
            page = PageSpec(title, (("h1", title), *_paragraphs(r["evidence"])), host=host)
            out["expertqa"].append(
                _row(
                    "expertqa",
                    r,
                    page,
                    group=g,
                    split=split,
                    model_trained_on=q not in ab_held_q,
                )
            )
    hosts = host_pages(lang) if "ab_long" in names else ()
    for r in ab:
        q = r["question"].strip()
        split = _ab_split(r["id"])
        host, title = _title_from_url(next(iter(r.get("urls") or []), None))
        common = {
            "group": "question:" + q,
            "split": split,
            "model_trained_on": split == "dev",
            "question_in_dev": q in ab_dev_q,
        }
        if "ab_short" in names:
            page = PageSpec(title, (("h1", title), *_paragraphs(r["evidence"])), host=host)
            out["ab_short"].append(_row("ab_short", r, page, **common))
        if "ab_long" in names and hosts:
            page = ab_long_page(r["id"], title, r["evidence"], hosts, host)
            out["ab_long"].append(_row("ab_long", r, page, **common))
    return out


def sample(
    rows: Sequence[dict[str, Any]], limit: int | None, seed: int = SEED
) -> list[dict[str, Any]]:
    """At most ``limit`` rows, a seeded sample stratified by label (all rows when None)."""
    if limit is None or len(rows) <= limit:
        return list(rows)
    rng = random.Random(f"{seed}|sample")
    pos = [r for r in rows if r["y"] == 1]
    neg = [r for r in rows if r["y"] == 0]
    k = max(1, min(len(pos), round(limit * len(pos) / len(rows)))) if pos else 0
    picked = rng.sample(pos, k) + rng.sample(neg, min(len(neg), limit - k))
    return sorted(picked, key=lambda r: _sha(r["id"]))
