"""AttributionBench's dev pairs on long pages (AB-long): each row's evidence placed inside a real
page's text from ``passages/`` at a paragraph boundary (page and place seeded by the row), and
the page those paragraphs make. Shared by :mod:`benchmarks.bench_longpage_bands` (the held-out
half) and :mod:`training.whole_page_bands` (the tune half)."""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import bench_support_bands as bsb
from training import support_data as sd

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _filler_texts() -> list[str]:
    """The visible text of the real pages of ``passages/`` over 5 kB (as citeguard reads them)."""
    from citeguard.web.page import extract_page

    out = []
    for f in sorted((DATA / "passages").glob("*.html")):
        page = extract_page(f.read_bytes(), url=f"http://filler.example/{f.name}")
        if len(page.text) > 5_000:
            out.append(page.text)
    return out


def _html(title: str, paragraphs: Sequence[str]) -> bytes:
    body = "".join(f"<p>{html.escape(p.strip())}</p>" for p in paragraphs if p.strip())
    t = html.escape(title[:80])
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{t}</title></head>'
        f"<body><article><h1>{t}</h1>{body}</article></body></html>"
    ).encode()


def ab_long_half(part: str) -> list[dict[str, Any]]:
    """AB's ``part`` half ("held_out" or "tune"), each row with ``page_paragraphs``: its
    evidence inside a real page's text, at a paragraph boundary (page and place seeded by the
    row)."""
    fill = _filler_texts()
    rows = []
    for r in bsb.ab_rows():
        if r["part"] != part:
            continue
        rnd = random.Random(sd._sha(r["id"]))
        paras = fill[rnd.randrange(len(fill))].split("\n")
        k = rnd.randrange(len(paras) + 1)
        r = dict(r)
        r["page_paragraphs"] = paras[:k] + r["evidence"].split("\n") + paras[k:]
        rows.append(r)
    return rows


def ab_long_rows() -> list[dict[str, Any]]:
    """AB's held-out half, each with ``page`` (its evidence inside a real page's text) and
    ``part`` ``band_dev`` or ``report``."""
    rows = ab_long_half("held_out")
    for r in rows:
        r["part"] = "band_dev" if int(sd._sha(r["question"]), 16) % 2 == 0 else "report"
    return rows
