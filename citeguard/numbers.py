"""The one number reader: a number is read whole, in each locale's common forms.

``1,234.5`` (English), ``1.234,5`` (German, Italian, Spanish...), ``1 234,5`` (French, with a
plain, no-break, narrow no-break or thin space), ``1'234.5`` (Swiss), ``12.6%``, ``6,100``,
``12.6 s``: each is one number, read the same way in a claim and on a page. A form that two
locales read differently (``1,234`` is 1234 in English and 1.234 in German; ``6.100`` the
reverse) carries both readings (:attr:`Quantity.readings`), so a comparison can ask whether
*any* plausible reading matches and call numbers different only when *every* reading differs.

Numbers written against characters of scripts without spaces are read too: ``到2022年``,
``1.7亿`` (1.7 × 10⁸), ``126万亿元`` (1.26 × 10¹⁴ yuan), full-width ``５．２％`` (folded to
ASCII first, offsets kept), and Chinese numerals with a unit or two digits (``三千``,
``五百万``, ``百分之五``).

The scan is one regular expression whose repetitions cannot overlap what follows them: linear
in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from citeguard.lang import NO_SPACE_SCRIPTS

__all__ = [
    "NUMBER_TOKEN",
    "Quantity",
    "Reading",
    "backs",
    "read_numbers",
]

# spaces that group digits: plain, no-break, figure, thin and narrow no-break
_SPACES = " \u00a0\u2007\u2009\u202f"
_GROUP_SEPS = ",." + _SPACES + "'’"

_PERCENT = (
    r"%|percent\b|per\s?cent\b|prozent\b|pour\s?cent\b|por\s?ciento\b|per\s?cento\b"
    r"|por\s?cento\b|procent\b"
)
# "billion" is 10^9 in English (and in this reader); "milliard(e)" is the continental 10^9.
# Bare "k", "m" and "b" are left out on purpose: "100m" is a sprint and "5k" a run as often as
# they are money, and a wrong scale would turn a match into a missing number.
_SCALES: dict[str, float] = {
    "thousand": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "mio": 1e6,
    "millionen": 1e6,
    "millones": 1e6,
    "milioni": 1e6,
    "milhões": 1e6,
    "miljoen": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "milliard": 1e9,
    "milliarde": 1e9,
    "milliarden": 1e9,
    "milliards": 1e9,
    "mrd": 1e9,
    "miliardi": 1e9,
    "miljard": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}
_SCALE = "|".join(sorted(_SCALES, key=len, reverse=True))
_SP = f"[{_SPACES}]"
# units of measure written as symbols right after a number ("12.6 s", "404 m", "3 km"): two
# numbers with the same symbol measure the same kind of thing
_MEASURES = (
    r"km/h|m/s|mph|km²|m²|km|cm|mm|ms|min|kg|mg|kWh|MWh|GWh|kW|MW|GW|GB|MB|TB|Hz|GHz|MHz"
    r"|°C|°F|s|m|g|h|t"
)

# One number as written. The alternatives are tried in order: digit groups of exactly three
# (separated by commas, dots, spaces or apostrophes, with an optional decimal part after the
# other separator), then plain digits with an optional decimal part. A group is three digits not
# followed by a fourth, and the groups end at the first that is not one: a match never fails
# after reading a run, so no run is read twice (linear). A number glued to a word ("COVID-19",
# "A4", "Boeing-737") is part of a name, not a quantity.
_DIGITS = (
    # not glued to a word or a number before it; a character of a script written without
    # spaces may stand right before it ("到2022年")
    rf"(?<![.,'’])(?<![^\W{NO_SPACE_SCRIPTS}])(?<![A-Za-z]-)"
    r"(?P<num>"
    r"\d{1,3}(?:,\d{3}(?!\d))+(?:\.\d+)?"
    r"|\d{1,3}(?:\.\d{3}(?!\d))+(?:,\d+)?"
    rf"|\d{{1,3}}(?:{_SP}\d{{3}}(?!\d))+(?:[.,]\d+)?"
    r"|\d{1,3}(?:['’]\d{3}(?!\d))+(?:[.,]\d+)?"
    r"|\d+(?:[.,]\d+)?"
    r")"
)
# Chinese scale characters after digits ("1.7亿", "126万亿"), and currencies written after them
_CJK_SCALES: dict[str, float] = {"万亿": 1e12, "亿": 1e8, "万": 1e4, "千": 1e3, "百": 1e2}
_CJK_CURRENCIES: dict[str, str] = {"元": "¥", "人民币": "¥", "美元": "$", "欧元": "€", "英镑": "£"}
_NUMBER_RE = re.compile(
    r"(?P<cur>[$€£¥])?\s?"
    + _DIGITS
    + rf"(?:\s?(?P<cjkscale>{'|'.join(_CJK_SCALES)}))?"
    + rf"(?:\s?(?P<pct>{_PERCENT}))?"
    + rf"(?:\s?(?P<scale>{_SCALE})\b\.?)?"
    + rf"(?:\s?(?P<pct2>{_PERCENT}))?"
    + rf"(?:\s?(?P<cur2>[€$£¥]|{'|'.join(_CJK_CURRENCIES)}))?"
    + rf"(?:\s?(?P<measure>{_MEASURES})(?![\w/²³]))?",
    re.IGNORECASE,
)

#: A word-tokenizer alternative that keeps a number with decimal or thousands separators whole
#: (``12.6``, ``6,100``, ``1.234,5``): put it before a word pattern so "12.6" is not "12" and "6".
NUMBER_TOKEN = r"\d+(?:[.,'’]\d+)+"


@dataclass(frozen=True, slots=True)
class Reading:
    """One plausible value of a number as written, and its decimal places (its precision)."""

    value: float
    decimals: int


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number as written (``text``, at ``start``:``end``), its plausible readings (the
    first is the one an English reader takes), its scale word and unit."""

    text: str
    start: int
    end: int
    readings: tuple[Reading, ...]
    scale: float  # 1, 1e3, 1e6 ...: the scale word, folded into each reading's value
    unit: str  # "%", a currency sign, a unit symbol ("s", "km"), or ""
    is_year: bool


def _readings(raw: str) -> tuple[tuple[float, int], ...]:
    """The plausible (value, decimals) readings of the digits and separators in ``raw``."""
    s = raw
    for ch in _SPACES + "'’":
        s = s.replace(ch, " ")
    if " " in s:  # spaces and apostrophes only group; a comma or a dot after them is decimal
        whole, _, frac = s.replace(" ", "").replace(",", ".").partition(".")
        return ((float(f"{whole}.{frac or 0}"), len(frac)),)
    commas, dots = s.count(","), s.count(".")
    if commas and dots:  # both: the last one is the decimal separator
        dec = "," if s.rfind(",") > s.rfind(".") else "."
        group = "." if dec == "," else ","
        whole, _, frac = s.replace(group, "").partition(dec)
        return ((float(f"{whole}.{frac}"), len(frac)),)
    if not commas and not dots:
        return ((float(s), 0),)
    sep = "," if commas else "."
    if commas + dots > 1:  # "1,234,567", "1.234.567": grouping only
        return ((float(s.replace(sep, "")), 0),)
    whole, frac = s.split(sep)
    decimal = (float(f"{whole}.{frac}"), len(frac))
    if len(frac) != 3 or whole.startswith("0"):
        return (decimal,)  # "12.6", "12,6", "0,234": a decimal separator, whatever the locale
    grouped = (float(whole + frac), 0)
    if frac == "000":
        return (grouped,)  # nobody writes ten as "10,000" or "10.000"
    # "1,234" / "6.100": a thousands group to one locale, three decimals to another
    return (grouped, decimal) if sep == "," else (decimal, grouped)


# full-width digits, point, comma and percent sign → ASCII (one character for one: offsets hold)
_FULL_WIDTH = str.maketrans(
    {**{0xFF10 + i: str(i) for i in range(10)}, 0xFF0E: ".", 0xFF05: "%", 0xFF04: "$"}
)


def read_numbers(text: str) -> Iterator[Quantity]:
    """The numbers of ``text``, read whole, with percentages, currencies and scale words."""
    folded = text.translate(_FULL_WIDTH)
    for m in _NUMBER_RE.finditer(folded):
        raw = m.group("num")
        written, end = text[m.start() : m.end()], m.end()
        measure = m.group("measure") or ""
        if _is_decade(raw, measure, m.start("measure") == m.end("num")):
            written, end, measure = text[m.start() : m.end("num")], m.end("num"), ""
        scale_word = (m.group("scale") or "").lower()
        factor = _SCALES.get(scale_word, 1.0) * _CJK_SCALES.get(m.group("cjkscale") or "", 1.0)
        cur2 = m.group("cur2") or ""
        unit = (
            "%"
            if (m.group("pct") or m.group("pct2"))
            else (m.group("cur") or _CJK_CURRENCIES.get(cur2, cur2) or measure)
        )
        is_year = (raw.isdigit() and len(raw) == 4 and factor == 1.0 and not unit) and 1000 <= int(
            raw
        ) <= 2100
        yield Quantity(
            text=written.strip(),
            start=m.start(),
            end=end,
            readings=tuple(Reading(v * factor, d) for v, d in _readings(raw)),
            scale=factor,
            unit=unit,
            is_year=is_year,
        )
    if _HAN_NUMERAL_RE.search(text):
        yield from _chinese_numbers(text)


# Chinese numerals: a run of numeral characters holding a unit character or two digits
# ("三千", "五百万", "十二", "二〇二二"), or a percentage ("百分之五", "百分之十二点五")
_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6}
_CN_DIGITS |= {"七": 7, "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 1e4, "亿": 1e8}
_CN_RUN = "[零〇一二两三四五六七八九十百千万亿]"
_HAN_NUMERAL_RE = re.compile(_CN_RUN)
_CN_NUMBER_RE = re.compile(
    rf"(?P<pct>百分之)?(?P<run>{_CN_RUN}{{1,24}}(?:点[零〇一二三四五六七八九]{{1,12}})?)"
)
# numeral runs that are words, not numbers: "千万" (by all means), "万一" (in case), "一一" (one
# by one), "十分" (very)
_CN_WORDS = frozenset({"千万", "万一", "一一", "十分", "百百"})


def _cn_value(run: str) -> tuple[float, int]:
    """The value and decimals of a Chinese numeral run, or None when it is not one."""
    whole, _, frac = run.partition("点")
    if all(ch in _CN_DIGITS for ch in whole) and len(whole) > 1:
        value = float("".join(str(_CN_DIGITS[ch]) for ch in whole))  # "二〇二二"
    else:
        # yi: the parts counted in 亿 (10^8); wan: the part below them counted in 万 (10^4);
        # section: the part below 万 (十, 百, 千 and a last digit)
        yi, wan, section, digit = 0.0, 0.0, 0.0, -1.0
        for ch in whole:
            if ch in _CN_DIGITS:
                digit = _CN_DIGITS[ch]
            elif ch in _CN_UNITS:
                section += (1.0 if digit < 0 else digit) * _CN_UNITS[ch]
                digit = -1.0
            elif ch == "万":
                wan = (wan + section + max(digit, 0.0)) * _CN_BIG[ch]
                section, digit = 0.0, -1.0
            else:  # 亿: everything so far is counted in it
                yi = (yi + wan + section + max(digit, 0.0)) * _CN_BIG[ch]
                wan, section, digit = 0.0, 0.0, -1.0
        value = yi + wan + section + max(digit, 0.0)
    if frac:
        value += float("0." + "".join(str(_CN_DIGITS[ch]) for ch in frac))
    return value, len(frac)


def _chinese_numbers(text: str) -> Iterator[Quantity]:
    for m in _CN_NUMBER_RE.finditer(text):
        run, pct = m.group("run"), bool(m.group("pct"))
        whole = run.partition("点")[0]
        has_unit = any(ch in _CN_UNITS or ch in _CN_BIG for ch in whole)
        if run in _CN_WORDS or not (pct or has_unit or len(whole) >= 2):
            continue
        if whole and whole[0] in _CN_BIG:
            continue  # "万" alone, "亿万": no count before the scale
        value, decimals = _cn_value(run)
        yield Quantity(
            text=m.group(),
            start=m.start(),
            end=m.end(),
            readings=(Reading(value, decimals),),
            scale=1.0,
            unit="%" if pct else "",
            is_year=not pct and len(whole) == 4 and whole[0] in "一二" and 1000 <= value <= 2100,
        )


def _is_decade(raw: str, measure: str, glued: bool) -> bool:
    """ "1990s", "80s": a decade, not seconds ("60 s" and "12.6s" are seconds)."""
    return measure == "s" and glued and raw.isdigit() and len(raw) in (2, 4) and raw[-1] == "0"


def backs(claim: Sequence[Reading], evidence: Sequence[Reading], *, scale: float = 1.0) -> bool:
    """Whether some plausible reading of ``evidence`` backs some plausible reading of a claim's
    number (``claim``, written with a scale word worth ``scale``), allowing for rounding at the
    claim's precision: "2.4 trillion" is backed by "2.43 trillion", "about 40%" by "39.6%"."""
    for c in claim:
        tolerance = 0.5 * 10.0 ** (-c.decimals) * scale + 1e-9 * max(1.0, abs(c.value))
        if any(abs(c.value - e.value) <= tolerance for e in evidence):
            return True
    return False
