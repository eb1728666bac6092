"""The pages the loopback web serves (:mod:`benchmarks.web`): the pages of
``../shared/data/passages`` with their hand-labelled exact quotes (read at run time, never
copied into the repo), else seeded generated pages. Below :mod:`benchmarks.web` and
:mod:`benchmarks.long_pages`, which both build on it."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PASSAGES = DATA / "passages"
GENERATED_PAGES = 60


@dataclass(frozen=True)
class PageSet:
    """The page bodies the web serves and, per page, quotes known to be on it."""

    names: tuple[str, ...]
    quotes: tuple[tuple[str, ...], ...]
    generated: bool
    bodies: tuple[bytes, ...] = ()  # built in memory (``benchmarks.long_pages``)

    def __len__(self) -> int:
        return len(self.names)

    def body(self, i: int, seed: int) -> bytes:
        """The HTML bytes of page ``i`` (read from shared/data, built, or generated)."""
        if self.bodies:
            return self.bodies[i]
        if self.generated:
            return _generated_page(seed, i)[0]
        return (PASSAGES / self.names[i]).read_bytes()


def passage_pages(seed: int) -> PageSet:
    """Pages of ``shared/data/passages`` with at least one usable exact quote, else generated."""
    index = PASSAGES / "passages.jsonl"
    if index.is_file():
        by_file: dict[str, list[str]] = {}
        for line in index.read_text(encoding="utf-8").splitlines():
            if not line:
                continue
            row = json.loads(line)
            quote = row["quote"]
            # quotes go inside "…" and next to [n] markers in the answers built from them
            if row["kind"] != "exact" or any(c in quote for c in '"[]'):
                continue
            by_file.setdefault(row["file"], []).append(quote)
        names = tuple(sorted(f for f in by_file if (PASSAGES / f).is_file()))
        if names:
            return PageSet(names, tuple(tuple(by_file[n]) for n in names), generated=False)
    pages = [_generated_page(seed, i) for i in range(GENERATED_PAGES)]
    return PageSet(
        tuple(f"generated-{i}" for i in range(GENERATED_PAGES)),
        tuple(q for _, q in pages),
        generated=True,
    )


_WORDS = (
    "river",
    "council",
    "harbour",
    "budget",
    "station",
    "library",
    "report",
    "market",
    "season",
    "engineer",
    "museum",
    "festival",
    "railway",
    "province",
    "archive",
    "garden",
    "bridge",
    "orchestra",
    "school",
    "hospital",
    "factory",
    "village",
    "summit",
    "journal",
    "minister",
    "research",
    "coast",
    "valley",
    "theatre",
    "election",
    "vineyard",
)


def _generated_page(seed: int, i: int) -> tuple[bytes, tuple[str, ...]]:
    rng = random.Random(f"{seed}|page|{i}")
    sentences = []
    for _ in range(rng.randint(40, 120)):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 18))]
        sentences.append(" ".join(words).capitalize() + ".")
    paras = ["<p>" + " ".join(sentences[k : k + 4]) + "</p>" for k in range(0, len(sentences), 4)]
    html = (
        f"<html><head><title>Generated page {i}</title></head><body><article>"
        + "\n".join(paras)
        + "</article></body></html>"
    )
    quotes = tuple(s.rstrip(".") for s in rng.sample(sentences, 3))
    return html.encode(), quotes
