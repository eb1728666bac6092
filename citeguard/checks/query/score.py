"""One query against the analysed prompt: the 1–5 rubric per part, one rule per kind of item."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from citeguard.checks.query.lexicon import _DOWN, _GENERIC, _REGION_CANON, _UP, _YEAR_RE, _stem
from citeguard.checks.query.prompt import (
    _analyse_prompt,
    _analyse_query,
    _is_capish,
    _Item,
    _Prompt,
    _Query,
)
from citeguard.models import Finding, Severity
from citeguard.text import QUERY_STOPWORDS, QUERY_TOKEN_RE


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


@dataclass
class _Scoring:
    """One query being scored: what it kept, dropped and added, and each part's tally."""

    q: _Query
    covered: frozenset[str]
    findings: list[Finding] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)
    tallies: dict[str, _Tally] = field(
        default_factory=lambda: {"constraints": _Tally(), "entities": _Tally(), "breadth": _Tally()}
    )
    entity_words: set[str] = field(default_factory=set)  # stems the prompt's items account for

    def issue(
        self, part: str, code: str, message: str, *, hard: bool, item: _Item | None = None
    ) -> None:
        """One finding; counted in ``part`` unless another query of the answer keeps ``item``."""
        details: dict[str, object] = {"part": part, "hard": hard}
        if item is not None:
            details["kind"] = item.kind
            details["key"] = item.key
            if item.key in self.covered:
                # Another query of the same answer keeps it: say so, do not count it.
                self.findings.append(
                    Finding(
                        code=code,
                        message=f"{message} (another query keeps it)",
                        severity=Severity.INFO,
                        axis="query",
                        details={**details, "covered": True},
                    )
                )
                return
        tally = self.tallies[part]
        if hard:
            tally.hard += 1
        else:
            tally.weak += 1
        self.findings.append(
            Finding(
                code=code,
                message=message,
                severity=Severity.ERROR if hard else Severity.WARNING,
                axis="query",
                details=details,
            )
        )

    def drop(self, item: _Item, part: str, code: str, message: str) -> None:
        """``item`` is gone from the query: a hard issue."""
        self.dropped.append(item.dropped_text)
        self.issue(part, code, message, hard=True, item=item)


# --------------------------------------------------------------------------------------------
# One rule per kind of item: kept, dropped, or kept with a weak issue
# --------------------------------------------------------------------------------------------


def _keep_year(s: _Scoring, item: _Item) -> None:
    if item.label in s.q.years:
        s.kept.add(item.key)
    else:
        s.drop(item, "constraints", "query.dropped_year", f"dropped the year {item.label}")


def _keep_version(s: _Scoring, item: _Item) -> None:
    num = str(item.data[0])
    if re.search(rf"(?<![\d.]){re.escape(num)}(?![\d])", s.q.lower):
        s.kept.add(item.key)
    else:
        s.drop(item, "constraints", "query.dropped_version", f"dropped version '{item.label}'")


_Number = tuple[str, float, str, str | None, tuple[int, int]]


def _number_matches(q: _Query, value: object, unit: object) -> list[_Number]:
    """The query's numbers equal to ``value`` in a compatible unit (a bare number when unitless)."""
    matches = [
        n
        for n in q.numbers
        if abs(n[1] - float(str(value))) < 1e-9 and (not n[2] or not unit or n[2] == unit)
    ]
    if not matches:
        bare = re.search(rf"(?<![\d.]){re.escape(f'{value:g}')}(?![\d.])", q.lower)
        if bare and not unit:
            matches = [("", float(str(value)), "", None, bare.span())]
    return matches


def _check_direction(s: _Scoring, item: _Item, direction: object, matches: list[_Number]) -> None:
    """A kept number whose comparator the query reversed (hard) or dropped (weak)."""
    qdirs = {n[3] for n in matches}
    if direction not in (_UP, _DOWN) or direction in qdirs:
        return
    opposite = _DOWN if direction == _UP else _UP
    if opposite in qdirs:
        s.issue(
            "constraints",
            "query.reversed_constraint",
            f"reversed constraint '{item.label}' to '{matches[0][0]}'",
            hard=True,
            item=item,
        )
    else:
        s.issue(
            "constraints",
            "query.weakened_constraint",
            f"weakened constraint '{item.label}' to '{matches[0][0]}' (the comparator is gone)",
            hard=False,
            item=item,
        )


def _keep_number(s: _Scoring, item: _Item) -> None:
    value, unit, direction = item.data
    matches = _number_matches(s.q, value, unit)
    if not matches:
        s.drop(
            item, "constraints", "query.dropped_constraint", f"dropped constraint '{item.label}'"
        )
        return
    s.kept.add(item.key)
    _check_direction(s, item, direction, matches)


def _keep_region(s: _Scoring, item: _Item) -> None:
    if item.data[0] in s.q.regions:
        s.kept.add(item.key)
    else:
        s.drop(item, "constraints", "query.dropped_region", f"dropped region {item.label}")


def _keep_phrase(s: _Scoring, item: _Item) -> None:
    phrase = item.label.lower()
    if phrase not in s.q.lower:
        s.drop(item, "constraints", "query.dropped_phrase", f'dropped quoted phrase "{item.label}"')
        return
    s.kept.add(item.key)
    s.entity_words.update(_stem(w) for w in QUERY_TOKEN_RE.findall(phrase))
    if f'"{phrase}"' not in s.q.lower and f"“{phrase}”" not in s.q.lower:
        s.issue(
            "constraints",
            "query.unquoted_phrase",
            f'kept "{item.label}" but without quotes, so it is no longer exact',
            hard=False,
            item=item,
        )


def _keep_exclusion(s: _Scoring, item: _Item) -> None:
    obj = str(item.data[0])
    first = re.escape(obj.split()[0])
    s.entity_words.update(_stem(w) for w in obj.split())
    if re.search(rf"{_NEGATION}{first}\b", s.q.text, re.IGNORECASE):
        s.kept.add(item.key)
    elif re.search(rf"\b{first}\b", s.q.text, re.IGNORECASE):
        s.drop(
            item,
            "constraints",
            "query.inverted_exclusion",
            f"turned exclusion '{item.label}' into a search for '{obj}'",
        )
    else:
        s.drop(item, "constraints", "query.dropped_exclusion", f"dropped exclusion '{item.label}'")


def _acronym_hit(item: _Item, words: list[str], q: _Query) -> bool:
    """Does the query hold the entity as its initials, or spell out the acronym it is?"""
    initials = "".join(w[0] for w in words if w).lower()
    return (len(words) > 1 and initials in q.stems) or (
        len(words) == 1 and item.label.isupper() and _expands(item.label, q.tokens)
    )


def _keep_entity(s: _Scoring, item: _Item) -> None:
    words = [str(w) for w in item.data]
    s.entity_words.update(words)
    present = [w for w in words if w in s.q.stems]
    acronym_hit = _acronym_hit(item, words, s.q)
    if item.label.lower() in s.q.lower or len(present) == len(words) or acronym_hit:
        s.kept.add(item.key)
        if acronym_hit:
            s.entity_words.update(_expansion(item.label, s.q.tokens))
    elif present and len(present) * 2 >= len(words):
        s.kept.add(item.key)
        shown = [t for t in QUERY_TOKEN_RE.findall(item.label) if _stem(t) in s.q.stems]
        s.issue(
            "entities",
            "query.shortened_entity",
            f"shortened '{item.label}' to '{' '.join(shown)}'",
            hard=False,
            item=item,
        )
    else:
        s.drop(item, "entities", "query.dropped_entity", f"dropped entity '{item.label}'")


_ITEM_RULES: dict[str, Callable[[_Scoring, _Item], None]] = {
    "year": _keep_year,
    "version": _keep_version,
    "number": _keep_number,
    "region": _keep_region,
    "phrase": _keep_phrase,
    "exclusion": _keep_exclusion,
    "entity": _keep_entity,
}


# --------------------------------------------------------------------------------------------
# Breadth: what the query added, and how much of the prompt it kept
# --------------------------------------------------------------------------------------------


@dataclass
class _Added:
    generic: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)


def _accounted_for(token: str, q: _Query, prompt_regions: set[object]) -> bool:
    """Is a (non-generic) query token the prompt's, a year, a stopword or part of a number?"""
    lower = token.lower()
    if _YEAR_RE.fullmatch(token) or lower in QUERY_STOPWORDS:
        return True
    if any(token in n[0] for n in q.numbers) or lower.isdigit():
        return True
    region = _REGION_CANON.get(token) or _REGION_CANON.get(lower)
    return region is not None and region in prompt_regions


def _added_words(prompt: _Prompt, s: _Scoring) -> _Added:
    """The query's tokens the prompt does not account for: generic words, names, other terms."""
    prompt_regions = {it.data[0] for it in prompt.items if it.kind == "region"}
    added = _Added()
    for token in s.q.tokens:
        lower = token.lower()
        stem = _stem(lower)
        if lower in prompt.words or stem in prompt.words or stem in s.entity_words:
            continue
        if lower in _GENERIC:
            if _GENERIC[lower] not in prompt.generic_classes and lower not in added.generic:
                added.generic.append(lower)
            continue
        if _accounted_for(token, s.q, prompt_regions):
            continue
        target = added.names if _is_capish(token) else added.terms
        if token not in target:
            target.append(token)
    return added


def _report_added(s: _Scoring, prompt: _Prompt, added: _Added) -> None:
    """Generic words and years are hard; names weak; more than one other term weak."""
    for word in added.generic:
        s.added.append(word)
        s.issue("breadth", "query.added_generic", f"added generic term '{word}'", hard=True)
    for year in sorted(s.q.years - prompt.years):
        s.added.append(year)
        s.issue(
            "breadth",
            "query.added_year",
            f"added the year {year}, which the prompt did not ask for",
            hard=True,
        )
    for name in added.names:
        s.added.append(name)
        s.issue(
            "breadth",
            "query.added_entity",
            f"added '{name}', which the prompt does not mention",
            hard=False,
        )
    if len(added.terms) > 1:
        s.added.extend(added.terms)
        s.issue(
            "breadth",
            "query.added_terms",
            f"added {len(added.terms)} terms the prompt does not use: "
            + ", ".join(f"'{t}'" for t in added.terms),
            hard=False,
        )
    elif added.terms:
        s.added.extend(added.terms)  # one refining word is free ("battery" → "battery life")


def _check_coverage(s: _Scoring, prompt: _Prompt) -> None:
    """A question turned into a bare topic (hard), or most key terms lost (weak)."""
    if not prompt.content:
        return
    keptc = {c for c in prompt.content if c in s.q.stems}
    share = len(keptc) / len(prompt.content)
    lost_words = [w for c, w in prompt.content.items() if c not in keptc]
    lost = ", ".join(f"'{w}'" for w in lost_words[:5])
    if prompt.is_lookup and len(prompt.content) >= 4 and share < 0.5 and len(s.q.tokens) <= 3:
        s.issue(
            "breadth",
            "query.topic_rewrite",
            f"turned the question into the bare topic '{s.q.text}' (lost {lost})",
            hard=True,
        )
    elif len(prompt.content) >= 3 and share < 0.34:
        s.issue(
            "breadth",
            "query.lost_specificity",
            f"kept only {len(keptc)} of {len(prompt.content)} key terms of the prompt "
            f"(lost {lost})",
            hard=False,
        )


def _score(prompt: _Prompt, query: str, covered: frozenset[str]) -> tuple[QueryScore, set[str]]:
    """One query against the analysed prompt: its score and the keys of the items it kept."""
    s = _Scoring(_analyse_query(query), covered)
    for item in prompt.items:
        _ITEM_RULES[item.kind](s, item)
    _report_added(s, prompt, _added_words(prompt, s))
    _check_coverage(s, prompt)
    scores = {part: _rubric(t.hard, t.weak) for part, t in s.tallies.items()}
    return (
        QueryScore(
            constraints=scores["constraints"],
            entities=scores["entities"],
            breadth=scores["breadth"],
            overall=min(scores.values()),
            findings=s.findings,
            dropped=s.dropped,
            added=s.added,
            kept=[it.label for it in prompt.items if it.key in s.kept],
        ),
        s.kept,
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
