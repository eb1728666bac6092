"""The query axis's vocabulary: generic words, regions, units, comparators and the patterns
that find years, versions, numbers, quoted phrases and exclusions."""

from __future__ import annotations

import re
from collections.abc import Sequence

from citeguard.text import QUERY_STOPWORDS, word_set

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
