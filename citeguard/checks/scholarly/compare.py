"""A reference entry against a paper's metadata: is it this paper (its title placed in the
entry), and which of its authors, year and venue does the entry get wrong.

Tolerated, as no error: case, accents and LaTeX (both sides are read through
:func:`~citeguard.checks.scholarly.entry.clean`), a subtitle left out (or one the metadata
lacks), "et al." (or "and others", "…") after the first author, initials for given names, and a
year one off from the published one where the entry cites a preprint. Linear in the entry and
the metadata (both capped)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from citeguard.checks.scholarly.entry import Entry, Tok, tokens
from citeguard.checks.scholarly.work import Work, same_venue, venue_keys, venue_words
from citeguard.models import MetadataMismatch

# the share of a title's words an entry must hold for a paper whose title it does not carry
# exactly to be taken as the one it means (a near-miss title), rather than another paper
NEAR_TITLE_SHARE = 0.7
_MAX_AUTHORS_SHOWN = 8
# words an author list holds besides names
_NOT_NAMES = frozenset(
    [
        "and",
        "et",
        "al",
        "others",
        "eds",
        "ed",
        "editors",
        "editor",
        "by",
        "with",
        "jr",
        "sr",
        "ii",
        "iii",
        "iv",
        "van",
        "von",
        "der",
        "den",
        "de",
        "di",
        "da",
        "del",
        "della",
        "la",
        "le",
        "du",
        "dos",
        "das",
        "bin",
        "ibn",
        "al",
        "el",
        "ten",
        "ter",
        "in",
    ]
)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a paper's title sits in an entry's words (``start`` to ``end``)."""

    start: int
    end: int


def _find(words: Sequence[str], seq: Sequence[str], limit: int = 400) -> int:
    """The first index of ``seq`` in ``words`` (-1: none)."""
    n, m = len(words), len(seq)
    if not m or m > n:
        return -1
    first = seq[0]
    for i in range(min(n - m + 1, limit)):
        if words[i] == first and list(words[i : i + m]) == list(seq):
            return i
    return -1


def place_title(entry: Entry, work: Work) -> Placement | None:
    """Where ``work``'s title is in the entry: whole, without its subtitle (the entry then goes
    on without a ``:``), or whole with a subtitle the metadata lacks."""
    title = [t.low for t in tokens(work.title, limit=80)]
    while title and title[-1] == ":":
        title.pop()
    if not title:
        return None
    words = [t.low for t in entry.words]
    i = _find(words, title)
    if i >= 0:
        return Placement(i, i + len(title))
    if ":" in title:
        main = title[: title.index(":")]
        if len(main) >= 2:
            i = _find(words, main)
            if i >= 0 and (i + len(main) >= len(words) or words[i + len(main)] != ":"):
                return Placement(i, i + len(main))
    return None


def title_share(entry: Entry, work: Work) -> float:
    """The share of ``work``'s title words that the entry holds."""
    title = {t.low for t in tokens(work.title, limit=80) if t.low != ":"}
    if not title:
        return 0.0
    return len(title & {t.low for t in entry.words}) / len(title)


def find_work(entry: Entry, works: Sequence[Work]) -> tuple[Work, Placement | None] | None:
    """The paper among ``works`` that the entry means: the first whose title it carries; else
    the one whose title it nearly carries (a near-miss title: ``None`` placement); else none."""
    for work in works:
        placed = place_title(entry, work)
        if placed is not None:
            return work, placed
    near = [(title_share(entry, w), k, w) for k, w in enumerate(works)]
    near = [n for n in near if n[0] >= NEAR_TITLE_SHARE and len(tokens(n[2].title, limit=80)) >= 3]
    if not near:
        return None
    best = max(near, key=lambda n: (n[0], -n[1]))
    return best[2], None


def mismatches(entry: Entry, work: Work, placed: Placement | None) -> list[MetadataMismatch]:
    """Each field the entry gets wrong about ``work`` (``placed``: where its title is in the
    entry; None: the entry does not carry the title)."""
    source = work.source
    out: list[MetadataMismatch] = []
    if placed is None:
        cited = entry.title_guess() or entry.text[:200]
        out.append(MetadataMismatch(field="title", cited=cited, found=work.title, source=source))
        return out  # without the title placed, the entry's parts cannot be told apart
    authors = _authors(entry, work, placed)
    if authors is not None:
        out.append(authors)
    year = _year(entry, work)
    if year is not None:
        out.append(year)
    venue = _venue(entry, work, placed)
    if venue is not None:
        out.append(venue)
    return out


def _is_initials(tok: Tok) -> bool:
    return len(tok.text) == 1 or (len(tok.text) <= 3 and tok.text.isupper())


def _authors(entry: Entry, work: Work, placed: Placement) -> MetadataMismatch | None:
    if not work.authors:
        return None
    listed = entry.words[: placed.start]
    if entry.is_bibtex:
        listed = tokens(entry.fields.get("author", ""))
    names = [t for t in listed if t.low.isalpha() and not _is_initials(t)]
    present = {t.low for t in names}  # particles too: "Le", "Das", "van" are family names
    names = [t for t in names if t.low not in _NOT_NAMES]
    if not names:
        return None  # the entry lists no authors
    known: set[str] = set()
    initials: set[str] = set()
    for p in work.authors:
        for t in tokens(f"{p.given} {p.family}", limit=20):
            known.add(t.low)
        for t in tokens(p.given, limit=10):
            if len(t.low) == 1:
                initials.add(t.low)
    # a name the paper's authors do not have, unless it is a given name the metadata gives as an
    # initial, or a run of initials ("JWvd": Jan-Willem van de, in Vancouver style)
    firsts = {w[0] for w in known}
    strangers = [
        t.text
        for t in names
        if t.low not in known
        and t.low[0] not in initials
        and not (len(t.low) <= 4 and set(t.low) <= firsts and t.text[0].isupper())
    ]
    required = work.authors[:1] if (entry.et_al or not work.authors_complete) else work.authors
    missing = [
        p
        for p in required
        if (fam := [t.low for t in tokens(p.family, limit=10)]) and not present.intersection(fam)
    ]
    if not strangers and not missing:
        return None
    shown = ", ".join(str(p) for p in work.authors[:_MAX_AUTHORS_SHOWN])
    if len(work.authors) > _MAX_AUTHORS_SHOWN or not work.authors_complete:
        shown += " et al."
    cited = " ".join(t.text for t in listed if not t.low.isdigit() and t.low != ":")
    why = []
    if strangers:
        why.append("not an author: " + ", ".join(dict.fromkeys(strangers[:5])))
    if missing:
        why.append("left out: " + ", ".join(str(p) for p in missing[:5]))
    return MetadataMismatch(
        field="authors", cited=f"{cited[:300]} ({'; '.join(why)})", found=shown, source=work.source
    )


def _year(entry: Entry, work: Work) -> MetadataMismatch | None:
    if work.year is None:
        return None
    in_title = {int(t.low) for t in tokens(work.title, limit=80) if t.low.isdigit()}
    years = [y for y in entry.years if y not in in_title]
    if not years or work.year in years:
        return None
    if (entry.preprint or work.preprint) and any(abs(y - work.year) <= 1 for y in years):
        return None  # a preprint's year beside the published one
    return MetadataMismatch(
        field="year", cited=str(years[0]), found=str(work.year), source=work.source
    )


def _cited_venue(entry: Entry, placed: Placement) -> str:
    if entry.is_bibtex:
        return " ".join(entry.fields.get(k, "") for k in ("booktitle", "journal")).strip()
    after = entry.words[placed.end :]
    return " ".join(t.text for t in after if not t.low.isdigit() and t.low != ":")


def _venue(entry: Entry, work: Work, placed: Placement) -> MetadataMismatch | None:
    cited = _cited_venue(entry, placed)
    if not venue_words(cited):
        return None  # no venue named
    keys = venue_keys(cited)
    cites_preprint = entry.preprint or keys == {"arxiv"}
    if work.preprint:
        if cites_preprint:
            return None
        return MetadataMismatch(
            field="venue",
            cited=cited[:200],
            found=f"{work.venue or 'arXiv'} (a preprint, not published at a venue)",
            source=work.source,
        )
    if cites_preprint or not work.venue:
        return None  # the preprint of a published paper, or a venue the metadata does not name
    if same_venue(cited, work.venue) is False:
        return MetadataMismatch(
            field="venue", cited=cited[:200], found=work.venue, source=work.source
        )
    return None
