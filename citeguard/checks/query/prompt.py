"""What a prompt asks for (:class:`_Prompt`: its constraints and entities, in order) and what a
query holds (:class:`_Query`), read with the patterns of :mod:`.lexicon`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from citeguard.checks.query.lexicon import (
    _BETWEEN_RE,
    _CONNECTORS,
    _DIRECTIONS,
    _EXCLUSION_RE,
    _GENERIC,
    _KNOWN_PRODUCTS,
    _MAX_PROMPT_CHARS,
    _MAX_QUERY_CHARS,
    _MONTHS,
    _NUMBER_RE,
    _NUMERIC_RE,
    _OPERATOR_RE,
    _PHRASE_RE,
    _QUESTION_START,
    _REGION_CANON,
    _REGION_CASED_RE,
    _REGION_FOLD_RE,
    _ROLES,
    _UNITS,
    _UP,
    _VERSION_RE,
    _YEAR_RE,
    _number_value,
    _stem,
)
from citeguard.text import QUERY_STOPWORDS, QUERY_TOKEN_RE, fold_whitespace


@dataclass(frozen=True)
class _Item:
    """One thing the prompt asked for that a query should keep."""

    kind: str  # year, version, number, region, phrase, exclusion, entity
    key: str  # canonical, for matching across queries
    label: str  # as the user wrote it
    data: tuple[object, ...] = ()

    @property
    def dropped_text(self) -> str:
        if self.kind == "year":
            return f"year {self.label}"
        if self.kind == "region":
            return f"region {self.label}"
        if self.kind == "phrase":
            return f'"{self.label}"'
        return f"'{self.label}'"


@dataclass
class _Prompt:
    items: list[_Item] = field(default_factory=list)
    content: dict[str, str] = field(default_factory=dict)  # stem → word, other content words
    words: set[str] = field(default_factory=set)  # every lowercase word and its stem
    years: set[str] = field(default_factory=set)
    generic_classes: set[str] = field(default_factory=set)
    is_lookup: bool = False


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in taken)


def _direction(comp: str | None, plus: str | None, tail: str | None) -> str | None:
    if comp:
        return _DIRECTIONS.get(fold_whitespace(comp.lower()))
    if plus:
        return _UP
    if tail:
        return _DIRECTIONS.get(fold_whitespace(tail.lower()))
    return None


def _numbers(
    text: str, taken: list[tuple[int, int]]
) -> list[tuple[str, float, str, str | None, tuple[int, int]]]:
    """(label, value, unit family, direction, span) of numeric constraints in ``text``."""
    found: list[tuple[str, float, str, str | None, tuple[int, int]]] = []
    spans: list[tuple[int, int]] = list(taken)
    for m in _BETWEEN_RE.finditer(text):
        unit = _UNITS.get((m.group("unit") or m.group("u1") or m.group("cur") or "").lower(), "")
        for g in ("a", "b"):
            found.append(
                (m.group(0), _number_value(m.group(g), None), unit, "range", (m.start(), m.end()))
            )
        spans.append((m.start(), m.end()))
    for m in _NUMBER_RE.finditer(text):
        num_span = (m.start("num"), m.end("num"))
        if _overlaps(num_span, spans):
            continue
        raw_unit = (m.group("unit") or "").lower()
        unit = _UNITS.get(raw_unit, "")
        if m.group("cur"):
            unit = _UNITS[m.group("cur")]
        comp, plus, tail = m.group("comp"), m.group("plus"), m.group("tail")
        if not (comp or plus or tail or unit or m.group("mult")):
            continue  # a bare number ("top 3", "season 1") is not a constraint
        direction = _direction(comp, plus, tail)
        if raw_unit in _UNITS and not m.group("cur"):
            end = m.end("unit")
        elif not unit and raw_unit and comp and raw_unit not in QUERY_STOPWORDS:
            unit = _stem(raw_unit)  # "over 1000 employees": the noun is the unit
            end = m.end("unit")
        else:
            end = max(m.end("num"), m.end("mult"), m.end("plus"))
        if tail:
            end = m.end("tail")
        label = fold_whitespace(text[m.start() : end])
        found.append(
            (
                label,
                _number_value(m.group("num"), m.group("mult")),
                unit,
                direction,
                (m.start(), end),
            )
        )
    return found


def _regions(text: str) -> list[tuple[str, str, tuple[int, int]]]:
    out: list[tuple[str, str, tuple[int, int]]] = []
    for m in _REGION_CASED_RE.finditer(text):
        out.append((_REGION_CANON[m.group(0)], m.group(0), m.span()))
    for m in _REGION_FOLD_RE.finditer(text):
        canon = _REGION_CANON.get(m.group(0).lower())
        if canon is not None:
            out.append((canon, m.group(0), m.span()))
    return out


_NAME_BEFORE_RE = re.compile(r"[A-Z][\w&.'’-]*\s+(?:of|of\s+the|de|du|da|di)\s+$")
_NAME_AFTER_RE = re.compile(r"\s+(?:[A-Z][a-z]|[a-z]+[A-Z])")


def _inside_name(text: str, alias: str, span: tuple[int, int]) -> bool:
    """Is a region alias part of a longer name ("Bank of America", "New York Times")?"""
    if _NAME_BEFORE_RE.search(text[max(0, span[0] - 40) : span[0]]):
        return True
    # Codes (EU, UK, US) stay regions before a name ("EU AI Act", "UK GDP"); full names
    # followed by a capitalised word are usually part of it ("American Express").
    return not alias.isupper() and bool(_NAME_AFTER_RE.match(text, span[1]))


def _is_capish(token: str) -> bool:
    if token[0].isdigit():
        return False
    return token[0].isupper() or any(c.isupper() for c in token[1:])


def _entities(text: str, taken: list[tuple[int, int]]) -> list[tuple[str, tuple[int, int]]]:
    """Capitalised names, acronyms and camel-case product names, outside ``taken`` spans."""
    out: list[tuple[str, tuple[int, int]]] = []
    run: list[re.Match[str]] = []
    pending: list[re.Match[str]] = []  # connectors inside a run ("Bank of America")

    def flush() -> None:
        nonlocal run
        if run:
            first = run[0]
            word = first.group(0)
            before = text[max(0, first.start() - 8) : first.start()].rstrip()
            sentence_start = not before or before[-1] in ".?!:;\n"
            # A lone capitalised common word at a sentence start is not a name ("Laptops with").
            if len(run) == 1 and sentence_start and word[1:].islower():
                run = []
                return
            if word.lower() in _QUESTION_START and word[1:].islower():
                run = run[1:]
            if run:
                start, end = run[0].start(), run[-1].end()
                out.append((text[start:end], (start, end)))
        run = []

    prev_end = -1
    for m in QUERY_TOKEN_RE.finditer(text):
        token = m.group(0).strip(".")
        if not token:
            continue
        gap = text[prev_end : m.start()] if prev_end >= 0 else " "
        prev_end = m.end()
        if _overlaps(m.span(), taken) or (gap.strip() and gap.strip() not in {"&", "-"}):
            flush()
            pending = []
            if _overlaps(m.span(), taken):
                continue
        lower = token.lower()
        if _is_capish(token) and lower not in _MONTHS and lower not in _ROLES and token != "I":
            run.extend(pending)
            pending = []
            run.append(m)
        elif run and lower in _CONNECTORS and len(pending) < 2:
            pending.append(m)
        else:
            flush()
            pending = []
    flush()
    return out


@dataclass
class _Found:
    """The items found so far, each with its offset, and the spans they took."""

    items: list[tuple[int, _Item]] = field(default_factory=list)
    taken: list[tuple[int, int]] = field(default_factory=list)

    def add(self, start: int, item: _Item, span: tuple[int, int]) -> None:
        self.items.append((start, item))
        self.taken.append(span)

    def free(self, span: tuple[int, int]) -> bool:
        return not _overlaps(span, self.taken)


def _find_phrases(prompt: str, found: _Found) -> None:
    """Quoted phrases ("...", “...”, ‘...’)."""
    for m in _PHRASE_RE.finditer(prompt):
        phrase = fold_whitespace(m.group("a") or m.group("b") or m.group("c") or "")
        if phrase:
            found.add(m.start(), _Item("phrase", "phrase:" + phrase.lower(), phrase), m.span())


def _exclusion_object(m: re.Match[str]) -> tuple[str, str] | None:
    """(object, label) of one exclusion match, or None when no content word follows the cue."""
    if m.group("op"):
        return m.group("op"), m.group(0).strip()
    kept: list[str] = []
    for w in m.group("obj").split():
        if w.lower() in QUERY_STOPWORDS:
            break
        kept.append(w)
    if not kept:
        return None
    obj = " ".join(kept)
    return obj, f"{fold_whitespace(m.group('cue'))} {obj}"


def _find_exclusions(prompt: str, found: _Found) -> None:
    """Exclusions ("without X", "-X", "excluding X")."""
    for m in _EXCLUSION_RE.finditer(prompt):
        if not found.free(m.span()):
            continue
        read = _exclusion_object(m)
        if read is None:
            continue
        obj, label = read
        end = m.start() + len(m.group(0).split(obj, 1)[0]) + len(obj)
        item = _Item("exclusion", "exclusion:" + obj.lower(), label, (obj,))
        found.add(m.start(), item, (m.start(), end))


def _find_years(prompt: str, found: _Found) -> None:
    """Years (2026, FY2025)."""
    for m in _YEAR_RE.finditer(prompt):
        if not found.free(m.span()):
            continue
        year = m.group("year")
        found.add(m.start(), _Item("year", "year:" + year, year), m.span())


def _is_product_name(name: str) -> bool:
    """May ``name`` be the product of a "name 5" version ("iPhone 15", not "page 5")?"""
    lower = name.lower()
    if lower in QUERY_STOPWORDS or lower in _GENERIC or lower in _MONTHS:
        return False
    if not (_is_capish(name) or lower in _KNOWN_PRODUCTS):
        return False
    return len(name) >= 2 or lower in _KNOWN_PRODUCTS


def _version_number(m: re.Match[str]) -> tuple[str, str] | None:
    """(number, label) of one version match, or None when it is not a product's version."""
    if m.group("num"):
        return m.group("num"), m.group(0)
    if m.group("dotted"):
        return m.group("dotted"), m.group(0)
    if not _is_product_name(m.group("name")):
        return None
    return m.group("num2"), m.group(0)


def _find_versions(prompt: str, found: _Found) -> None:
    """Versions ("v2.1", "Python 3.12", "iPhone 15")."""
    for m in _VERSION_RE.finditer(prompt):
        if not found.free(m.span()):
            continue
        read = _version_number(m)
        if read is None:
            continue
        num, label = read
        item = _Item("version", "version:" + num.lower(), label.strip(), (num,))
        found.add(m.start(), item, m.span())


def _find_numbers(prompt: str, found: _Found) -> None:
    """Numeric constraints ("over 10 hours", "under $500"), one item per value and unit."""
    for label, value, unit, direction, span in _numbers(prompt, found.taken):
        key = f"number:{value:g}:{unit}"
        if any(it.key == key for _, it in found.items):
            continue
        found.add(span[0], _Item("number", key, label, (value, unit, direction)), span)


def _find_regions(prompt: str, found: _Found) -> None:
    """Regions ("EU", "in Germany"), not those inside a longer name; one item per region."""
    seen: set[str] = set()
    for canon, text, span in sorted(_regions(prompt), key=lambda r: r[2]):
        if not found.free(span) or _inside_name(prompt, text, span):
            continue
        found.taken.append(span)
        if canon not in seen:
            seen.add(canon)
            found.items.append((span[0], _Item("region", "region:" + canon, text, (canon,))))


def _find_entities(prompt: str, found: _Found) -> None:
    """Names outside the spans taken so far, one item per name (its words stemmed)."""
    seen: set[str] = set()
    for name, span in _entities(prompt, found.taken):
        key = "entity:" + name.lower()
        if key in seen:
            continue
        seen.add(key)
        words = tuple(
            _stem(w) for w in QUERY_TOKEN_RE.findall(name) if w.lower() not in _CONNECTORS
        )
        found.add(span[0], _Item("entity", key, name, words), span)


def _read_words(prompt: str, p: _Prompt, taken: list[tuple[int, int]]) -> None:
    """The prompt's words, generic classes and content words (outside the items' spans)."""
    for m in QUERY_TOKEN_RE.finditer(prompt):
        lower = m.group(0).lower().strip("'’.")
        p.words.add(lower)
        p.words.add(_stem(lower))
        if lower in _GENERIC:
            p.generic_classes.add(_GENERIC[lower])
        if _overlaps(m.span(), taken) or lower in QUERY_STOPWORDS or _NUMERIC_RE.fullmatch(lower):
            continue
        if lower not in _GENERIC and len(lower) > 1:
            p.content.setdefault(_stem(lower), lower)


_LOOKUP_STARTS = frozenset(
    {"what", "which", "who", "when", "where", "how", "is", "are", "does", "did", "can"}
)


def _is_lookup(prompt: str) -> bool:
    """Does the prompt ask a question (ends with "?" or opens with a question word)?"""
    stripped = prompt.strip()
    first = stripped.split(" ", 1)[0].lower() if stripped else ""
    return stripped.endswith("?") or first in _LOOKUP_STARTS


# The item finders, in the order they claim spans of the prompt: a span one takes is not read
# again by a later one (a year inside a quoted phrase is part of the phrase).
_FINDERS: tuple[Callable[[str, _Found], None], ...] = (
    _find_phrases,
    _find_exclusions,
    _find_years,
    _find_versions,
    _find_numbers,
    _find_regions,
    _find_entities,
)


def _analyse_prompt(prompt: str) -> _Prompt:
    """What ``prompt`` asks for: its items in order of appearance, words and content words."""
    prompt = prompt[:_MAX_PROMPT_CHARS]
    p = _Prompt()
    found = _Found()
    for finder in _FINDERS:
        finder(prompt, found)
    p.items = [it for _, it in sorted(found.items, key=lambda x: x[0])]
    p.years = {it.label for it in p.items if it.kind == "year"}
    _read_words(prompt, p, found.taken)
    p.is_lookup = _is_lookup(prompt)
    return p


@dataclass
class _Query:
    text: str
    lower: str
    tokens: list[str]
    stems: set[str]
    numbers: list[tuple[str, float, str, str | None, tuple[int, int]]]
    regions: set[str]
    years: set[str]


def _analyse_query(query: str) -> _Query:
    text = fold_whitespace(_OPERATOR_RE.sub(" ", query[:_MAX_QUERY_CHARS]))
    tokens = [t.strip("'’.") for t in QUERY_TOKEN_RE.findall(text)]
    stems = {_stem(t) for t in tokens} | {t.lower() for t in tokens}
    years = {m.group("year") for m in _YEAR_RE.finditer(text)}
    year_spans = [m.span() for m in _YEAR_RE.finditer(text)]
    return _Query(
        text=text,
        lower=text.lower(),
        tokens=tokens,
        stems=stems,
        numbers=_numbers(text, year_spans),
        regions={canon for canon, _, _ in _regions(text)},
        years=years,
    )


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------
