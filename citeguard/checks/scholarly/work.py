"""A paper as a metadata source describes it (a landing page's tags, Crossref, arXiv), and its
venue names: which spellings name the same venue."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from citeguard.checks.scholarly.entry import folded, tokens


@dataclass(frozen=True, slots=True)
class Person:
    given: str
    family: str

    @classmethod
    def of(cls, name: str) -> Person:
        """A name as one string: "Family, Given" or "Given Family" (a DBLP homonym number
        dropped)."""
        name = re.sub(r"\s\d{4}$", "", name.strip())
        if "," in name:
            family, _, given = name.partition(",")
            return cls(given.strip(), family.strip())
        given, _, family = name.rpartition(" ")
        return cls(given.strip(), family.strip())

    def __str__(self) -> str:
        return f"{self.given} {self.family}".strip()


@dataclass(frozen=True, slots=True)
class Work:
    """One paper's metadata. ``preprint``: the work is a preprint (arXiv, a posted content),
    not a paper published at a venue; ``source``: where this came from, for messages."""

    title: str
    authors: tuple[Person, ...] = ()
    year: int | None = None
    venue: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    preprint: bool = False
    source: str = ""
    authors_complete: bool = True
    # when the work came out, as exactly as its source says (Crossref's date parts, arXiv's
    # first version); a year alone is 1 January
    published: datetime | None = None


def dated(year: int | None, month: int | None = None, day: int | None = None) -> datetime | None:
    """A publication date from its parts (None: no year; a part out of range is dropped)."""
    if year is None:
        return None
    try:
        return datetime(year, month or 1, day or 1, tzinfo=UTC)
    except ValueError:
        try:
            return datetime(year, 1, 1, tzinfo=UTC)
        except ValueError:
            return None


# Venues: each canonical name and the folded word sequences that name it (whole words, in
# order). A venue is named by one of its sequences anywhere in the text (a full name
# "Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition" holds its
# "computer vision and pattern recognition").
_VENUES: dict[str, tuple[str, ...]] = {
    "neurips": ("neurips", "nips", "neural information processing systems"),
    "icml": ("icml", "international conference on machine learning"),
    "iclr": ("iclr", "international conference on learning representations"),
    "aaai": ("aaai",),
    "ijcai": ("ijcai", "international joint conference on artificial intelligence"),
    "cvpr": ("cvpr", "computer vision and pattern recognition"),
    "iccv": ("iccv", "international conference on computer vision"),
    "eccv": ("eccv", "european conference on computer vision"),
    "acl": ("acl", "annual meeting of the association for computational linguistics"),
    "emnlp": ("emnlp", "empirical methods in natural language processing"),
    "naacl": ("naacl", "north american chapter of the association for computational"),
    "kdd": ("kdd", "knowledge discovery and data mining"),
    "www": ("www", "the web conference", "world wide web conference"),
    "sigir": ("sigir",),
    "aistats": ("aistats", "artificial intelligence and statistics"),
    "uai": ("uai", "uncertainty in artificial intelligence"),
    "colt": ("colt", "conference on learning theory"),
    "corl": ("corl", "conference on robot learning"),
    "jmlr": ("jmlr", "j mach learn res", "journal of machine learning research"),
    "tmlr": ("tmlr", "trans mach learn res", "transactions on machine learning research"),
    "tpami": ("tpami", "pattern analysis and machine intelligence", "pami"),
    "mlj": ("mach learn", "machine learning"),
    "nature": ("nature",),
    "science": ("science",),
    "pnas": ("pnas", "proceedings of the national academy of sciences"),
    "arxiv": ("arxiv", "corr", "preprint"),
}
_VENUE_SEQS: list[tuple[tuple[str, ...], str]] = sorted(
    ((tuple(seq.split()), key) for key, seqs in _VENUES.items() for seq in seqs),
    key=lambda p: -len(p[0]),
)
# words that name no venue by themselves
_VENUE_NOISE = frozenset(
    [
        "in",
        "proc",
        "proceedings",
        "of",
        "the",
        "on",
        "and",
        "a",
        "an",
        "for",
        "annual",
        "international",
        "conference",
        "conf",
        "journal",
        "j",
        "symposium",
        "workshop",
        "ieee",
        "acm",
        "cvf",
        "ieee/cvf",
        "advances",
        "trans",
        "transactions",
        "vol",
        "volume",
        "no",
        "pp",
        "pages",
        "eds",
        "ed",
        "editors",
        "editor",
        "press",
        "publishers",
        "publisher",
        "series",
        "lecture",
        "notes",
        "track",
        "main",
        "findings",
        "companion",
        "part",
        "article",
        "paper",
        "papers",
    ]
)


def venue_keys(text: str) -> set[str]:
    """The known venues a venue string names (canonical keys)."""
    words = folded(text).replace(":", " ").split()[:120]
    found: set[str] = set()
    for seq, key in _VENUE_SEQS:
        n = len(seq)
        if key in found:
            continue
        for i in range(len(words) - n + 1):
            if tuple(words[i : i + n]) == seq:
                found.add(key)
                break
    # "Mach. Learn." alone is the journal, but not inside "Journal of Machine Learning Research"
    if "mlj" in found and found & {"jmlr", "tmlr", "icml", "iclr"}:
        found.discard("mlj")
    return found


def venue_words(text: str) -> list[str]:
    """A venue string's telling words, in order, each once (years, numbers, filler dropped)."""
    words = (t.low for t in tokens(text, limit=120))
    return list(
        dict.fromkeys(
            w
            for w in words
            if w not in _VENUE_NOISE and not w.isdigit() and w != ":" and len(w) > 1
        )
    )


def _abbreviates(cited: str, found: str) -> bool:
    """Whether ``cited`` abbreviates ``found`` word by word, in order ("Adv Neural Inf Process
    Syst" of "Advances in Neural Information Processing Systems"; ISO 4 style)."""
    short = [t.low for t in tokens(cited, limit=60) if t.low.isalpha()]
    long = [t.low for t in tokens(found, limit=60) if t.low.isalpha()]
    if len(short) < 2:
        return False
    j = 0
    for word in short:
        while j < len(long) and not long[j].startswith(word):
            j += 1
        if j == len(long):
            return False
        j += 1
    return True


def same_venue(cited: str, found: str) -> bool | None:
    """Whether two venue strings name one venue (None: the cited string names none)."""
    ck, fk = venue_keys(cited), venue_keys(found)
    if ck and fk:
        return bool(ck & fk)
    cl, fl = venue_words(cited), venue_words(found)
    if not cl:
        return None
    if not fl:
        return True
    if _abbreviates(cited, found):
        return True
    cw, fw = set(cl), set(fl)
    acronym_c = "".join(w[0] for w in cl)
    acronym_f = "".join(w[0] for w in fl)
    return cw <= fw or fw <= cw or acronym_f in cw or acronym_c in fw
