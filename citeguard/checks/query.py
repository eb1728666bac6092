"""The query axis: did the agent's search string keep what the user asked for?

A rewrite that drops a constraint returns a clean-looking result set that misses it, and no
synthesis recovers from that. :func:`score_query` compares one search query with the user's
prompt on a 1–5 rubric with three parts:

* **constraints** — years, versions (``v2.1``, ``Python 3.12``, ``iOS 18``), numbers with units
  and comparators ("over 10 hours", "under $500", ">= 16GB"), regions and countries (EU, US,
  Germany, ...), quoted phrases and exclusions ("without ads", "-term");
* **entities** — organisations, products, laws, people, acronyms and other capitalised names;
* **breadth** — generic words added (best, top, overview, guide, review, list, tips, ...), a
  year the prompt did not ask for, new names or terms, specificity lost, or a narrow lookup
  turned into a bare topic. Needless expansion is penalised as much as a drop.

Each part is scored with one rubric from its *hard* and *weak* issues:

======================  =====
issues                  score
======================  =====
none                    5
weak only               5 − weak, at least 2
one hard                2
two or more hard        1
======================  =====

Hard issues: a dropped year, version, number constraint, region, quoted phrase, exclusion or
entity; a reversed comparator; an exclusion turned into a search term; an added generic word or
year; a lookup turned into a topic. Weak issues: a comparator dropped but its number kept, a
phrase kept without quotes, a shortened name, added names or terms beyond the first, a low
share of the prompt's key terms. ``overall`` is the lowest of the three parts: one failing part
is enough to miss what the user asked for.

:func:`check_queries` scores every recorded query of an answer. A constraint or entity one
query drops but a sibling query keeps is reported (info) and not counted: agents often split a
comparison into one query per side.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from citeguard.checks.base import AnnotatorKind, CheckContext, is_llm_backend, skipped
from citeguard.checks.judge import ChatJudge, JudgeError, judge_for
from citeguard.models import AxisResult, Finding, Severity, Verdict
from citeguard.policy import Policy, QueryPolicy
from citeguard.text import QUERY_STOPWORDS, QUERY_TOKEN_RE, fold_whitespace, word_set

__all__ = ["JudgeQueryScorer", "QueryScore", "check_queries", "score_query"]


class QueryScore(BaseModel):
    """The rubric scores of one (prompt, query) pair and the findings behind them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    constraints: int = Field(ge=1, le=5)
    entities: int = Field(ge=1, le=5)
    breadth: int = Field(ge=1, le=5)
    overall: int = Field(ge=1, le=5)
    findings: list[Finding] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)  # what the query lost, e.g. "year 2026"
    added: list[str] = Field(default_factory=list)  # what it added, e.g. "best"
    kept: list[str] = Field(default_factory=list)  # constraints and entities it kept


# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------
# The stopword list and the tokenizer are citeguard.text.QUERY_STOPWORDS and QUERY_TOKEN_RE.

# Generic words that broaden a query. Words in one class stand in for each other: a prompt that
# says "newest" may be searched with "latest".
_GENERIC_CLASSES: dict[str, frozenset[str]] = {
    "best": word_set("best top greatest leading ultimate finest recommended"),
    "overview": word_set("overview introduction intro guide tutorial explained basics primer 101"),
    "review": word_set("review reviews rating ratings ranked ranking rankings comparison"),
    "list": word_set("list lists listing roundup"),
    "tips": word_set("tips tricks ideas hacks advice"),
    "latest": word_set("latest newest new recent current updated today"),
    "info": word_set("news info information facts details everything complete comprehensive"),
}
_GENERIC: dict[str, str] = {w: c for c, ws in _GENERIC_CLASSES.items() for w in ws}

_MONTHS = word_set(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday"""
)
_QUESTION_START = word_set(
    """what which who whom whose when where why how is are was were do does did can could should
    would will compare list find show tell give explain summarize summarise describe i my we
    please in on for the a an any"""
)

# Regions and countries; aliases map to one canonical name so "German" keeps "Germany".
_REGION_ALIASES: dict[str, tuple[str, ...]] = {
    "EU": ("EU", "E.U.", "European Union", "EEA", "Europe", "European", "eurozone"),
    "US": ("US", "U.S.", "USA", "U.S.A.", "United States", "America", "American"),
    "UK": ("UK", "U.K.", "United Kingdom", "Britain", "Great Britain", "British", "England"),
    "Germany": ("Germany", "German", "Deutschland"),
    "France": ("France", "French"),
    "Italy": ("Italy", "Italian"),
    "Spain": ("Spain", "Spanish"),
    "Netherlands": ("Netherlands", "Dutch", "Holland"),
    "Belgium": ("Belgium", "Belgian"),
    "Sweden": ("Sweden", "Swedish"),
    "Norway": ("Norway", "Norwegian"),
    "Denmark": ("Denmark", "Danish"),
    "Finland": ("Finland", "Finnish"),
    "Poland": ("Poland", "Polish"),
    "Ireland": ("Ireland", "Irish"),
    "Portugal": ("Portugal", "Portuguese"),
    "Austria": ("Austria", "Austrian"),
    "Switzerland": ("Switzerland", "Swiss"),
    "Greece": ("Greece", "Greek"),
    "Czechia": ("Czechia", "Czech Republic", "Czech"),
    "Ukraine": ("Ukraine", "Ukrainian"),
    "Russia": ("Russia", "Russian"),
    "Turkey": ("Turkey", "Türkiye", "Turkish"),
    "China": ("China", "Chinese", "PRC"),
    "Japan": ("Japan", "Japanese"),
    "South Korea": ("South Korea", "Korea", "Korean"),
    "India": ("India", "Indian"),
    "Indonesia": ("Indonesia", "Indonesian"),
    "Vietnam": ("Vietnam", "Vietnamese"),
    "Singapore": ("Singapore", "Singaporean"),
    "Australia": ("Australia", "Australian"),
    "New Zealand": ("New Zealand",),
    "Canada": ("Canada", "Canadian"),
    "Mexico": ("Mexico", "Mexican"),
    "Brazil": ("Brazil", "Brazilian"),
    "Argentina": ("Argentina", "Argentinian", "Argentine"),
    "South Africa": ("South Africa", "South African"),
    "Nigeria": ("Nigeria", "Nigerian"),
    "Kenya": ("Kenya", "Kenyan"),
    "Egypt": ("Egypt", "Egyptian"),
    "Israel": ("Israel", "Israeli"),
    "Saudi Arabia": ("Saudi Arabia", "Saudi"),
    "UAE": ("UAE", "United Arab Emirates", "Emirati"),
    "Taiwan": ("Taiwan", "Taiwanese"),
    "Hong Kong": ("Hong Kong",),
    "Asia": ("Asia", "Asian", "APAC", "Asia-Pacific"),
    "Africa": ("Africa", "African"),
    "Latin America": ("Latin America", "LATAM", "South America"),
    "Middle East": ("Middle East", "MENA"),
    "Nordics": ("Nordics", "Nordic", "Scandinavia", "Scandinavian"),
    "California": ("California", "Californian"),
    "Texas": ("Texas",),
    "New York": ("New York", "NYC"),
}
# Short codes and words with a common lowercase meaning match only as written ("US" not "us",
# "Polish" not "polish", "Turkey" not "turkey").
_CASED_ALIASES = word_set(
    """US U.S. USA U.S.A. UK U.K. EU E.U. EEA PRC UAE APAC LATAM MENA NYC Polish Turkey China
    Chile Jordan Georgia Guinea"""
)
_REGION_CANON: dict[str, str] = {}
for _canon, _aliases in _REGION_ALIASES.items():
    for _alias in _aliases:
        _REGION_CANON[_alias if _alias in _CASED_ALIASES else _alias.lower()] = _canon


def _alias_alternation(aliases: Sequence[str]) -> str:
    return "|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True))


_REGION_CASED_RE = re.compile(
    rf"(?<![\w.])(?:{_alias_alternation([a for a in _REGION_CANON if a in _CASED_ALIASES])})"
    r"(?![\w])"
)
_REGION_FOLD_RE = re.compile(
    rf"\b(?:{_alias_alternation([a for a in _REGION_CANON if a not in _CASED_ALIASES])})\b",
    re.IGNORECASE,
)

_UNITS: dict[str, str] = {}
for _canon_u, _names in {
    "hour": "h hr hrs hour hours",
    "minute": "min mins minute minutes",
    "second": "s sec secs second seconds",
    "ms": "ms millisecond milliseconds",
    "day": "day days",
    "week": "week weeks wk wks",
    "month": "month months mo mos",
    "year": "year years yr yrs",
    "gb": "gb gig gigs gigabyte gigabytes",
    "tb": "tb terabyte terabytes",
    "mb": "mb megabyte megabytes",
    "kb": "kb kilobyte kilobytes",
    "ghz": "ghz",
    "mhz": "mhz",
    "hz": "hz",
    "w": "w watt watts",
    "kw": "kw kilowatt kilowatts",
    "wh": "wh",
    "kwh": "kwh",
    "mah": "mah",
    "v": "v volt volts",
    "mm": "mm millimeter millimeters millimetre millimetres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "m": "m meter meters metre metres",
    "km": "km kilometer kilometers kilometre kilometres",
    "mile": "mi mile miles",
    "kg": "kg kilo kilos kilogram kilograms",
    "g": "g gram grams",
    "lb": "lb lbs",
    "inch": "in inch inches",
    "ft": "ft foot feet",
    "mph": "mph",
    "kph": "kph km/h kmh",
    "fps": "fps",
    "mp": "mp megapixel megapixels",
    "pct": "% percent pct",
    "usd": "$ usd dollar dollars bucks",
    "eur": "€ eur euro euros",
    "gbp": "£ gbp pound pounds quid",
    "jpy": "¥ jpy yen",
    "core": "core cores",
    "star": "star stars",
    "people": "people person persons users employees",
    "k": "k",
}.items():
    for _n in _names.split():
        _UNITS[_n] = _canon_u

_UP = "up"
_DOWN = "down"
_APPROX = "approx"
_DIRECTIONS: dict[str, str] = {}
for _dir, _phrases in {
    _UP: "over|above|more than|greater than|exceeding|longer than|bigger than|larger than|"
    "at least|minimum|minimum of|min|min.|no less than|not less than|>|>=|≥|or more|and up|plus|+",
    _DOWN: "under|below|less than|fewer than|cheaper than|shorter than|smaller than|at most|"
    "up to|maximum|maximum of|max|max.|no more than|not more than|<|<=|≤|or less|and under|"
    "within",
    _APPROX: "around|about|approximately|approx|approx.|roughly|~|circa",
}.items():
    for _p in _phrases.split("|"):
        _DIRECTIONS[_p] = _dir

_COMP = (
    r"(?P<comp>more\s+than|less\s+than|fewer\s+than|greater\s+than|cheaper\s+than|"
    r"longer\s+than|shorter\s+than|bigger\s+than|larger\s+than|smaller\s+than|at\s+least|"
    r"at\s+most|up\s+to|no\s+more\s+than|no\s+less\s+than|not\s+more\s+than|not\s+less\s+than|"
    r"minimum(?:\s+of)?|maximum(?:\s+of)?|min\.?|max\.?|over|under|above|below|exceeding|"
    r"around|about|approximately|approx\.?|roughly|circa|within|>=|<=|≥|≤|>|<|~)"
)
_NUM = (
    r"(?P<cur>[$€£¥])?\s?(?P<num>\d+(?:[.,]\d+)*)\s?(?P<mult>k|bn|million|billion|thousand)?"
    r"(?P<plus>\+)?"
)
_UNIT = r"(?:\s?(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)?))?"
_TAIL = r"(?:\s+(?P<tail>or\s+more|or\s+less|and\s+up|and\s+under|plus))?"
_NUMBER_RE = re.compile(rf"(?:(?<![\w.]){_COMP}\s*)?(?<![\w.]){_NUM}{_UNIT}{_TAIL}", re.IGNORECASE)
_BETWEEN_RE = re.compile(
    r"\bbetween\s+(?P<cur>[$€£¥])?(?P<a>\d+(?:[.,]\d+)*)\s*(?P<u1>[A-Za-z%]+)?\s+and\s+"
    r"(?P<cur2>[$€£¥])?(?P<b>\d+(?:[.,]\d+)*)\s*(?P<unit>%|[A-Za-z]+)?",
    re.IGNORECASE,
)
_YEAR_RE = re.compile(r"(?<![\w.$€£¥-])(?:FY|CY)?(?P<year>(?:19|20)\d\d)(?![\w.%])")
_KNOWN_PRODUCTS = word_set(
    """python java javascript node nodejs ios ipados macos android windows ubuntu debian fedora
    rhel centos php ruby rust go golang perl swift kotlin scala typescript dotnet .net gpt llama
    claude gemini mistral qwen iphone ipad pixel galaxy xbox playstation ps switch chrome firefox
    safari edge excel office postgres postgresql mysql redis kubernetes k8s docker django flask
    react angular vue rails spring tensorflow pytorch torch cuda opengl directx vulkan http tls
    ssl ipv bluetooth wifi usb hdmi pcie ddr lte 5g"""
)
# Units that rule out a version reading ("Pixel 8 hours" is not a version); short or common
# words ("in", "m", "people") are left out so "Python 3.12 in 2026" stays a version.
_UNIT_WORDS = "|".join(
    sorted(
        (
            re.escape(u)
            for u, canon in _UNITS.items()
            if u.isalpha()
            and len(u) > 1
            and u not in QUERY_STOPWORDS
            and canon not in {"people", "star"}
        ),
        key=len,
        reverse=True,
    )
)
_VERSION_RE = re.compile(
    r"(?<![\w.])(?P<v>v|ver\.?|version\s*)(?P<num>\d+(?:\.\d+)*)\b"
    r"|(?P<name>[A-Za-z][A-Za-z+#.]*)[ -]?(?P<num2>\d+(?:\.\d+)*[a-z]?)\b"
    rf"(?![.,]?\d|\s?(?:%|(?:{_UNIT_WORDS})\b))"
    r"|(?<![\w.])(?P<dotted>\d+\.\d+\.\d+(?:\.\d+)*)\b",
    re.IGNORECASE,
)
_PHRASE_RE = re.compile(r"\"(?P<a>[^\"]{2,120})\"|“(?P<b>[^”]{2,120})”|‘(?P<c>[^’]{2,120})’")
_EXCLUSION_RE = re.compile(
    r"\b(?P<cue>without|excluding|exclude|except(?:\s+for)?|other\s+than|but\s+not|and\s+not|"
    r"not\s+including|with\s+no|minus)\s+(?:the\s+|a\s+|an\s+|any\s+)?"
    r"(?P<obj>[\w'’-]+(?:\s+[\w'’-]+){0,2})"
    r"|(?:(?<=\s)|^)-(?P<op>[A-Za-z][\w-]*)",
    re.IGNORECASE,
)
_OPERATOR_RE = re.compile(r"\b(?:site|intitle|inurl|filetype|inbody|lang):\S+", re.IGNORECASE)
# Lowercase words allowed inside a name ("Bank of America", "Lord of the Rings").
# Titles are not part of the name they precede or follow ("CEO of Bank of America").
_ROLES = word_set(
    """ceo cfo cto coo cio ciso president vice chairman chairwoman chair director head minister
    secretary governor mayor senator king queen prince princess pope professor dr mr mrs ms"""
)
# Prompts and queries are read up to these lengths: a search string is a line, and the
# constraints of a prompt are stated near its start. Keeps the scorer sub-millisecond.
_MAX_PROMPT_CHARS = 4000
_MAX_QUERY_CHARS = 1000
_NUMERIC_RE = re.compile(r"[\d.,:/+-]+")
_CONNECTORS = word_set("of the de du la le von van der da di &")


def _stem(word: str) -> str:
    """A light suffix stripper: enough to match "laptops" with "laptop" on both sides."""
    w = word.lower().strip("'’.")
    w = w.removesuffix("'s").removesuffix("’s")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("ches", "shes", "xes", "zes", "sses")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        if len(w) > 4 and w.endswith(("us", "is")):
            return w  # status, virus, analysis
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        return w[:-3]
    if len(w) > 4 and w.endswith("ed"):
        return w[:-2]
    return w


def _number_value(num: str, mult: str | None) -> float:
    text = num.replace(",", "") if num.count(",") and "." not in num else num.replace(",", ".")
    try:
        value = float(text)
    except ValueError:
        return float("nan")
    scale = {"k": 1e3, "thousand": 1e3, "million": 1e6, "bn": 1e9, "billion": 1e9}
    return value * scale.get((mult or "").lower(), 1.0)


# --------------------------------------------------------------------------------------------
# Features of a prompt and of a query
# --------------------------------------------------------------------------------------------


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


def _analyse_prompt(prompt: str) -> _Prompt:
    prompt = prompt[:_MAX_PROMPT_CHARS]
    p = _Prompt()
    taken: list[tuple[int, int]] = []
    items: list[tuple[int, _Item]] = []

    for m in _PHRASE_RE.finditer(prompt):
        phrase = fold_whitespace(m.group("a") or m.group("b") or m.group("c") or "")
        if phrase:
            items.append((m.start(), _Item("phrase", "phrase:" + phrase.lower(), phrase)))
            taken.append(m.span())
    for m in _EXCLUSION_RE.finditer(prompt):
        if _overlaps(m.span(), taken):
            continue
        if m.group("op"):
            obj, label = m.group("op"), m.group(0).strip()
        else:
            words = m.group("obj").split()
            kept: list[str] = []
            for w in words:
                if w.lower() in QUERY_STOPWORDS:
                    break
                kept.append(w)
            if not kept:
                continue
            obj = " ".join(kept)
            label = f"{fold_whitespace(m.group('cue'))} {obj}"
        end = m.start() + len(m.group(0).split(obj, 1)[0]) + len(obj)
        items.append((m.start(), _Item("exclusion", "exclusion:" + obj.lower(), label, (obj,))))
        taken.append((m.start(), end))
    for m in _YEAR_RE.finditer(prompt):
        if _overlaps(m.span(), taken):
            continue
        year = m.group("year")
        p.years.add(year)
        items.append((m.start(), _Item("year", "year:" + year, year)))
        taken.append(m.span())
    for m in _VERSION_RE.finditer(prompt):
        if _overlaps(m.span(), taken):
            continue
        if m.group("num"):
            num, label = m.group("num"), m.group(0)
        elif m.group("dotted"):
            num, label = m.group("dotted"), m.group(0)
        else:
            name, num = m.group("name"), m.group("num2")
            if (
                name.lower() in QUERY_STOPWORDS
                or name.lower() in _GENERIC
                or name.lower() in _MONTHS
            ):
                continue
            if not (_is_capish(name) or name.lower() in _KNOWN_PRODUCTS):
                continue
            if len(name) < 2 and name.lower() not in _KNOWN_PRODUCTS:
                continue
            label = m.group(0)
        items.append((m.start(), _Item("version", "version:" + num.lower(), label.strip(), (num,))))
        taken.append(m.span())
    for label, value, unit, direction, span in _numbers(prompt, taken):
        key = f"number:{value:g}:{unit}"
        if any(it.key == key for _, it in items):
            continue
        items.append((span[0], _Item("number", key, label, (value, unit, direction))))
        taken.append(span)
    seen_regions: set[str] = set()
    for canon, text, span in sorted(_regions(prompt), key=lambda r: r[2]):
        if _overlaps(span, taken) or _inside_name(prompt, text, span):
            continue
        taken.append(span)
        if canon not in seen_regions:
            seen_regions.add(canon)
            items.append((span[0], _Item("region", "region:" + canon, text, (canon,))))
    seen_entities: set[str] = set()
    for name, span in _entities(prompt, taken):
        key = "entity:" + name.lower()
        if key in seen_entities:
            continue
        seen_entities.add(key)
        words = tuple(
            _stem(w) for w in QUERY_TOKEN_RE.findall(name) if w.lower() not in _CONNECTORS
        )
        items.append((span[0], _Item("entity", key, name, words)))
        taken.append(span)

    p.items = [it for _, it in sorted(items, key=lambda x: x[0])]
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
    first = prompt.strip().split(" ", 1)[0].lower() if prompt.strip() else ""
    p.is_lookup = prompt.strip().endswith("?") or first in {
        "what",
        "which",
        "who",
        "when",
        "where",
        "how",
        "is",
        "are",
        "does",
        "did",
        "can",
    }
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


def _rubric(hard: int, weak: int) -> int:
    if hard >= 2:
        return 1
    if hard == 1:
        return 2
    return max(2, 5 - weak)


_NEGATION = r"(?:-\"?|\b(?:without|excluding|exclude|except|not|no|minus)\s+(?:the\s+|any\s+)?)"


@dataclass
class _Tally:
    hard: int = 0
    weak: int = 0


def _score(prompt: _Prompt, query: str, covered: frozenset[str]) -> tuple[QueryScore, set[str]]:
    q = _analyse_query(query)
    findings: list[Finding] = []
    dropped: list[str] = []
    added: list[str] = []
    kept: set[str] = set()
    tallies = {"constraints": _Tally(), "entities": _Tally(), "breadth": _Tally()}
    entity_words: set[str] = set()

    def issue(part: str, code: str, message: str, *, hard: bool, item: _Item | None = None) -> None:
        details: dict[str, object] = {"part": part, "hard": hard}
        if item is not None:
            details["kind"] = item.kind
            details["key"] = item.key
            if item.key in covered:
                # Another query of the same answer keeps it: say so, do not count it.
                findings.append(
                    Finding(
                        code=code,
                        message=f"{message} (another query keeps it)",
                        severity=Severity.INFO,
                        axis="query",
                        details={**details, "covered": True},
                    )
                )
                return
        tally = tallies[part]
        if hard:
            tally.hard += 1
        else:
            tally.weak += 1
        findings.append(
            Finding(
                code=code,
                message=message,
                severity=Severity.ERROR if hard else Severity.WARNING,
                axis="query",
                details=details,
            )
        )

    for item in prompt.items:
        if item.kind == "year":
            if item.label in q.years:
                kept.add(item.key)
            else:
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.dropped_year",
                    f"dropped the year {item.label}",
                    hard=True,
                    item=item,
                )
        elif item.kind == "version":
            num = str(item.data[0])
            if re.search(rf"(?<![\d.]){re.escape(num)}(?![\d])", q.lower):
                kept.add(item.key)
            else:
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.dropped_version",
                    f"dropped version '{item.label}'",
                    hard=True,
                    item=item,
                )
        elif item.kind == "number":
            value, unit, direction = item.data
            matches = [
                n
                for n in q.numbers
                if abs(n[1] - float(str(value))) < 1e-9 and (not n[2] or not unit or n[2] == unit)
            ]
            if not matches:
                bare = re.search(rf"(?<![\d.]){re.escape(f'{value:g}')}(?![\d.])", q.lower)
                if bare and not unit:
                    matches = [("", float(str(value)), "", None, bare.span())]
            if not matches:
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.dropped_constraint",
                    f"dropped constraint '{item.label}'",
                    hard=True,
                    item=item,
                )
                continue
            kept.add(item.key)
            qdirs = {n[3] for n in matches}
            if direction in (_UP, _DOWN) and direction not in qdirs:
                opposite = _DOWN if direction == _UP else _UP
                if opposite in qdirs:
                    issue(
                        "constraints",
                        "query.reversed_constraint",
                        f"reversed constraint '{item.label}' to '{matches[0][0]}'",
                        hard=True,
                        item=item,
                    )
                else:
                    issue(
                        "constraints",
                        "query.weakened_constraint",
                        f"weakened constraint '{item.label}' to '{matches[0][0]}' "
                        "(the comparator is gone)",
                        hard=False,
                        item=item,
                    )
        elif item.kind == "region":
            if item.data[0] in q.regions:
                kept.add(item.key)
            else:
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.dropped_region",
                    f"dropped region {item.label}",
                    hard=True,
                    item=item,
                )
        elif item.kind == "phrase":
            phrase = item.label.lower()
            if phrase in q.lower:
                kept.add(item.key)
                entity_words.update(_stem(w) for w in QUERY_TOKEN_RE.findall(phrase))
                if f'"{phrase}"' not in q.lower and f"“{phrase}”" not in q.lower:
                    issue(
                        "constraints",
                        "query.unquoted_phrase",
                        f'kept "{item.label}" but without quotes, so it is no longer exact',
                        hard=False,
                        item=item,
                    )
            else:
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.dropped_phrase",
                    f'dropped quoted phrase "{item.label}"',
                    hard=True,
                    item=item,
                )
        elif item.kind == "exclusion":
            obj = str(item.data[0])
            first = re.escape(obj.split()[0])
            entity_words.update(_stem(w) for w in obj.split())
            if re.search(rf"{_NEGATION}{first}\b", q.text, re.IGNORECASE):
                kept.add(item.key)
            elif re.search(rf"\b{first}\b", q.text, re.IGNORECASE):
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.inverted_exclusion",
                    f"turned exclusion '{item.label}' into a search for '{obj}'",
                    hard=True,
                    item=item,
                )
            else:
                dropped.append(item.dropped_text)
                issue(
                    "constraints",
                    "query.dropped_exclusion",
                    f"dropped exclusion '{item.label}'",
                    hard=True,
                    item=item,
                )
        elif item.kind == "entity":
            words = [str(w) for w in item.data]
            entity_words.update(words)
            present = [w for w in words if w in q.stems]
            initials = "".join(w[0] for w in words if w).lower()
            acronym_hit = (len(words) > 1 and initials in q.stems) or (
                len(words) == 1 and item.label.isupper() and _expands(item.label, q.tokens)
            )
            if item.label.lower() in q.lower or len(present) == len(words) or acronym_hit:
                kept.add(item.key)
                if acronym_hit:
                    entity_words.update(_expansion(item.label, q.tokens))
            elif present and len(present) * 2 >= len(words):
                kept.add(item.key)
                shown = [t for t in QUERY_TOKEN_RE.findall(item.label) if _stem(t) in q.stems]
                issue(
                    "entities",
                    "query.shortened_entity",
                    f"shortened '{item.label}' to '{' '.join(shown)}'",
                    hard=False,
                    item=item,
                )
            else:
                dropped.append(item.dropped_text)
                issue(
                    "entities",
                    "query.dropped_entity",
                    f"dropped entity '{item.label}'",
                    hard=True,
                    item=item,
                )

    # Breadth: what the query added, and how much of the prompt it kept.
    prompt_regions = {it.data[0] for it in prompt.items if it.kind == "region"}
    generic_added: list[str] = []
    added_names: list[str] = []
    added_terms: list[str] = []
    for token in q.tokens:
        lower = token.lower()
        stem = _stem(lower)
        if lower in prompt.words or stem in prompt.words or stem in entity_words:
            continue
        if lower in _GENERIC:
            if _GENERIC[lower] not in prompt.generic_classes and lower not in generic_added:
                generic_added.append(lower)
            continue
        if (
            _YEAR_RE.fullmatch(token)
            or lower in QUERY_STOPWORDS
            or any(token in n[0] for n in q.numbers)
        ):
            continue
        if lower.isdigit():
            continue
        region = _REGION_CANON.get(token) or _REGION_CANON.get(lower)
        if region is not None and region in prompt_regions:
            continue
        target = added_names if _is_capish(token) else added_terms
        if token not in target:
            target.append(token)
    for word in generic_added:
        added.append(word)
        issue("breadth", "query.added_generic", f"added generic term '{word}'", hard=True)
    for year in sorted(q.years - prompt.years):
        added.append(year)
        issue(
            "breadth",
            "query.added_year",
            f"added the year {year}, which the prompt did not ask for",
            hard=True,
        )
    for name in added_names:
        added.append(name)
        issue(
            "breadth",
            "query.added_entity",
            f"added '{name}', which the prompt does not mention",
            hard=False,
        )
    if len(added_terms) > 1:
        added.extend(added_terms)
        issue(
            "breadth",
            "query.added_terms",
            f"added {len(added_terms)} terms the prompt does not use: "
            + ", ".join(f"'{t}'" for t in added_terms),
            hard=False,
        )
    elif added_terms:
        added.extend(added_terms)  # one refining word is free ("battery" → "battery life")
    if prompt.content:
        keptc = {c for c in prompt.content if c in q.stems}
        share = len(keptc) / len(prompt.content)
        lost = [w for c, w in prompt.content.items() if c not in keptc]
        if prompt.is_lookup and len(prompt.content) >= 4 and share < 0.5 and len(q.tokens) <= 3:
            issue(
                "breadth",
                "query.topic_rewrite",
                f"turned the question into the bare topic '{q.text}' (lost "
                + ", ".join(f"'{w}'" for w in lost[:5])
                + ")",
                hard=True,
            )
        elif len(prompt.content) >= 3 and share < 0.34:
            issue(
                "breadth",
                "query.lost_specificity",
                f"kept only {len(keptc)} of {len(prompt.content)} key terms of the prompt "
                "(lost " + ", ".join(f"'{w}'" for w in lost[:5]) + ")",
                hard=False,
            )

    scores = {part: _rubric(t.hard, t.weak) for part, t in tallies.items()}
    overall = min(scores.values())
    return (
        QueryScore(
            constraints=scores["constraints"],
            entities=scores["entities"],
            breadth=scores["breadth"],
            overall=overall,
            findings=findings,
            dropped=dropped,
            added=added,
            kept=[it.label for it in prompt.items if it.key in kept],
        ),
        kept,
    )


def _expansion(acronym: str, tokens: Sequence[str]) -> list[str]:
    """The stems of the query tokens that spell ``acronym`` ("GDPR" → General Data ...)."""
    n = len(acronym)
    if n < 2:
        return []
    for i in range(len(tokens) - n + 1):
        window = tokens[i : i + n]
        if all(t[:1].isupper() for t in window) and "".join(t[0] for t in window) == acronym:
            return [_stem(t) for t in window]
    return []


def _expands(acronym: str, tokens: Sequence[str]) -> bool:
    """Does a run of capitalised query tokens spell ``acronym``?"""
    return bool(_expansion(acronym, tokens))


def score_query(prompt: str, query: str) -> QueryScore:
    """Score one search query against the user's prompt on the 1–5 rubric (module docstring).

    Findings name what was dropped or added ("dropped the year 2026", "dropped region EU",
    "dropped constraint 'over 10 hours'", "added generic term 'best'").
    """
    score, _ = _score(_analyse_prompt(prompt), query, frozenset())
    return score


def _not_evaluated(policy: QueryPolicy) -> AxisResult:
    return AxisResult(
        name="query",
        passed=True,
        evaluated=False,
        gating=policy.gating,
        details={"reason": "disabled" if not policy.enabled else "no queries were recorded"},
    )


def check_queries(prompt: str, queries: Sequence[str], policy: QueryPolicy) -> AxisResult:
    """The query axis for one answer: every recorded search query scored against the prompt.

    Passes when every query's ``overall`` reaches ``policy.min_score``. A constraint or entity
    that one query drops but another keeps is reported (info) without counting. ``gating`` comes
    from the policy: by default the axis reports and feeds back, since re-synthesis alone
    cannot fix a bad query. Not evaluated when no query was recorded. ``score`` is the lowest
    ``overall`` on the 1–5 scale.
    """
    if not policy.enabled or not queries:
        return _not_evaluated(policy)
    analysed = _analyse_prompt(prompt)
    first_pass = [_score(analysed, q, frozenset()) for q in queries]
    scores: list[QueryScore] = []
    for i, query in enumerate(queries):
        covered = frozenset().union(*(k for j, (_, k) in enumerate(first_pass) if j != i))
        scores.append(_score(analysed, query, covered)[0] if covered else first_pass[i][0])
    return _axis(queries, scores, policy)


def _axis(queries: Sequence[str], scores: Sequence[QueryScore], policy: QueryPolicy) -> AxisResult:
    """The query AxisResult from one score per query."""
    findings: list[Finding] = []
    per_query: list[dict[str, object]] = []
    worst = 5
    failing = 0
    for i, (query, score) in enumerate(zip(queries, scores, strict=True)):
        ok = score.overall >= policy.min_score
        failing += not ok
        worst = min(worst, score.overall)
        per_query.append({"query": query, **score.model_dump(exclude={"findings"})})
        for f in score.findings:
            severity = f.severity
            if ok and severity is Severity.ERROR:
                severity = Severity.WARNING  # the query passes; the issue is reported only
            findings.append(
                f.model_copy(
                    update={
                        "message": f"query {i + 1} ('{query}'): {f.message}",
                        "severity": severity,
                        "details": {**f.details, "query": query, "query_index": i},
                    }
                )
            )
    passed = failing == 0
    if not passed:
        findings.append(
            Finding(
                code="query.feedback",
                message=(
                    f"{failing} of {len(queries)} search queries lost what the prompt asked for"
                ),
                severity=Severity.ERROR,
                axis="query",
                details={
                    "feedback": (
                        "Search again with queries that keep the prompt's years, versions, "
                        "numbers, regions, quoted phrases, exclusions and names, without "
                        "generic words such as 'best' or 'overview'."
                    )
                },
            )
        )
    return AxisResult(
        name="query",
        passed=passed,
        score=float(worst),
        gating=policy.gating,
        findings=findings,
        details={"min_score": policy.min_score, "queries": per_query},
    )


# --------------------------------------------------------------------------------------------
# Optional judge backend
# --------------------------------------------------------------------------------------------

_QUERY_SYSTEM = """You grade a search query an agent wrote for a user's prompt.
Score three parts from 1 (bad) to 5 (faithful):
"constraints": the query keeps the prompt's years, versions, numbers with units and comparators
("over 10 hours"), regions and countries, quoted phrases and exclusions ("without X");
"entities": it keeps the organisations, products, laws, people and acronyms;
"breadth": it adds no generic words (best, top, overview, guide, review, list, tips), no year
or names the prompt did not ask for, and does not turn a narrow question into a broad topic.
Needless expansion costs as much as a drop. One dropped constraint scores 2 at most.
Reply with a JSON object: {"constraints": n, "entities": n, "breadth": n,
"dropped": ["what the query lost"], "added": ["what it added"],
"findings": [{"part": "constraints|entities|breadth", "message": "dropped the year 2026"}]}"""


class _JudgeFinding(BaseModel):
    part: str = "breadth"
    message: str


class _JudgeReply(BaseModel):
    constraints: int = Field(ge=1, le=5)
    entities: int = Field(ge=1, le=5)
    breadth: int = Field(ge=1, le=5)
    dropped: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    findings: list[_JudgeFinding] = Field(default_factory=list)


class JudgeQueryScorer(ChatJudge):
    """:func:`score_query` by an LLM judge with the same rubric (OpenAI-compatible endpoint).

    ``base_url`` is the API root (``.../v1``). Failed calls and replies outside the rubric are
    retried as :class:`~citeguard.checks.judge.ChatJudge` says; when the judge still gives no
    usable answer the deterministic scorer is used, with a ``query.judge_failed`` info finding
    saying why. Pass ``session`` to share an aiohttp session (it is then not closed by
    :meth:`aclose`).
    """

    async def score(self, prompt: str, query: str) -> QueryScore:
        """The judge's rubric scores for one (prompt, query) pair."""
        user = json.dumps(
            {"prompt": prompt[:_MAX_PROMPT_CHARS], "query": query[:_MAX_QUERY_CHARS]},
            ensure_ascii=False,
        )
        try:
            reply = await self.ask(_QUERY_SYSTEM, user, _rubric_reply)
        except JudgeError as exc:
            fallback = score_query(prompt, query)
            note = Finding(
                code="query.judge_failed",
                message=f"{exc}; deterministic scorer used",
                severity=Severity.INFO,
                axis="query",
            )
            return fallback.model_copy(update={"findings": [note, *fallback.findings]})
        parts = {"constraints": reply.constraints, "entities": reply.entities}
        parts["breadth"] = reply.breadth
        findings = [
            Finding(
                code=f"query.judge_{f.part if f.part in parts else 'breadth'}",
                message=f.message[:300],
                severity=(
                    Severity.ERROR if parts.get(f.part, reply.breadth) < 3 else Severity.WARNING
                ),
                axis="query",
                details={"part": f.part, "judge": True},
            )
            for f in reply.findings
        ]
        return QueryScore(
            constraints=reply.constraints,
            entities=reply.entities,
            breadth=reply.breadth,
            overall=min(parts.values()),
            findings=findings,
            dropped=[d[:200] for d in reply.dropped],
            added=[a[:200] for a in reply.added],
        )

    async def check_queries(
        self, prompt: str, queries: Sequence[str], policy: QueryPolicy
    ) -> AxisResult:
        """The query axis with judge scores (queries scored concurrently)."""
        if not policy.enabled or not queries:
            return _not_evaluated(policy)
        scores = await asyncio.gather(*(self.score(prompt, q) for q in queries))
        return _axis(queries, scores, policy)


def _rubric_reply(data: dict[str, Any]) -> _JudgeReply:
    """A judge's reply validated against the rubric (outside it is a malformed reply)."""
    try:
        return _JudgeReply.model_validate(data)
    except ValidationError as exc:
        raise JudgeError(
            "judge reply is outside the 1-5 rubric",
            detail="invalid response (outside the 1-5 rubric)",
            retryable=True,
        ) from exc


class QueryCheck:
    """The query axis as a registered check: the rules, or the judge the policy names."""

    name = "query"
    hint = "Search with the user's exact constraints (years, versions, regions, numbers)."
    feeds_back_when_advisory = True

    def __init__(self, policy: Policy) -> None:
        self._policy = policy.query
        q = policy.query
        self._judge = judge_for(policy, JudgeQueryScorer, q.enabled and q.use_judge)

    async def run(self, ctx: CheckContext) -> AxisResult:
        if not self._policy.enabled:
            return skipped(self.name)
        if self._judge is not None:
            return await self._judge.check_queries(ctx.question, ctx.queries, self._policy)
        return check_queries(ctx.question, ctx.queries, self._policy)

    def annotator(self, axis: AxisResult, verdict: Verdict) -> AnnotatorKind:
        return "LLM" if is_llm_backend(str(axis.details.get("backend") or "")) else "CODE"

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
