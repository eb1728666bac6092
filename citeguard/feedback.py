"""Turn a failed verdict into what the answer function needs to do better, or strip the answer.

``render_feedback`` writes the short message an LLM can act on; ``Feedback`` carries the same
content as data. ``strip_answer`` removes failing citations and the claims that relied only on
them, for ``Policy.on_fail="strip"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from citeguard.checks.registry import CHECKS
from citeguard.models import Answer, Finding, Severity, UrlSet, Verdict
from citeguard.web.urls import normalize_all


class Feedback(BaseModel):
    """Structured feedback handed to the answer function on regeneration."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    exclude_urls: UrlSet
    findings: list[Finding] = Field(default_factory=list)
    message: str
    # "fresher": the answer passed; the one attempt asking for fresher sources
    # (checks/freshness_ask.py), with nothing excluded for freshness
    kind: Literal["rejected", "fresher"] = "rejected"

    def __str__(self) -> str:
        return self.message


# each axis's hint, and whether its findings are fed back when it is advisory, come from its check
_CHECKS = {c.name: c for c in CHECKS}


def render_feedback(verdict: Verdict, *, attempt: int, exclude_urls: frozenset[str]) -> Feedback:
    """Build the feedback for the next attempt from a failed verdict."""
    lines = [f"Your answer (attempt {attempt}) was rejected by the citation guard."]
    errors = [
        f
        for axis in verdict.axes.values()
        for f in axis.findings
        if f.severity is Severity.ERROR and (axis.gating or _feeds_back_when_advisory(axis.name))
    ]
    for axis in verdict.axes.values():
        if axis.evaluated and not axis.passed:
            lines.append(f"- {axis.name} failed. {_hint(axis.name)}".rstrip())
    for f in errors[:12]:
        lines.append(f"  * {f.message}")
    if len(errors) > 12:
        lines.append(f"  * … and {len(errors) - 12} more findings")
    # claims whose support the guard could not settle: they passed, but the next attempt can
    # make them checkable (quote the page, or cite one that states them)
    unsettled = [
        f
        for f in (verdict.axes["validity"].findings if "validity" in verdict.axes else [])
        if f.code == "validity.support_uncertain"
    ]
    if unsettled:
        lines.append(
            "- Not settled (passed with a warning): the guard could not tell whether these "
            "pages support the claims citing them. Quote the page's own words, or cite a page "
            "that states the claim."
        )
        lines += [f"  * {f.message}" for f in unsettled[:6]]
        if len(unsettled) > 6:
            lines.append(f"  * … and {len(unsettled) - 6} more")
    if exclude_urls:
        lines.append("Do not cite these URLs again: " + ", ".join(sorted(exclude_urls)))
    return Feedback(
        attempt=attempt,
        exclude_urls=exclude_urls,
        findings=errors + unsettled,
        message="\n".join(lines),
    )


def _hint(axis: str) -> str:
    check = _CHECKS.get(axis)
    return check.hint if check is not None else ""


def _feeds_back_when_advisory(axis: str) -> bool:
    check = _CHECKS.get(axis)
    return check is not None and check.feeds_back_when_advisory


class Stripped(NamedTuple):
    """An answer with its failing citations removed."""

    text: str
    claims: list[str]  # the text of each claim removed (it relied only on failing citations)
    urls: list[str]  # the URLs of the citations removed, in answer order, once each
    claims_left: int  # cited or not


def strip_answer(
    answer: Answer, offending_urls: frozenset[str], claims: frozenset[int] = frozenset()
) -> Stripped:
    """Remove failing citations, and claims that relied only on them. Offending URLs may be
    given raw or normalised. ``claims``: the indices of claims removed whatever they cite (a
    claim that failed on a page the other claims keep citing: ``verdict.failing_claims``)."""
    bad = {
        i
        for i, c in enumerate(answer.citations)
        if c.url in offending_urls or (c.normalized_url or "") in offending_urls
    }
    cuts: list[tuple[int, int]] = []
    removed_claims: list[str] = []
    for claim in answer.claims:
        if not claim.citation_indices:
            continue
        if claim.index in claims or all(i in bad for i in claim.citation_indices):
            cuts.append((claim.start, claim.end))
            removed_claims.append(claim.text)
    in_cut = [
        i
        for i in bad
        if answer.citations[i].start >= 0
        and not any(s <= answer.citations[i].start < e for s, e in cuts)
    ]
    cuts.extend((answer.citations[i].start, answer.citations[i].end) for i in in_cut)
    text = answer.text
    # a link keeps its words; only the link goes
    labels = {
        (answer.citations[i].start, answer.citations[i].end): answer.citations[i].label or ""
        for i in in_cut
        if answer.citations[i].kind in ("inline_link", "html_anchor", "reference_link")
    }
    for start, end in sorted(cuts, reverse=True):
        text = text[:start] + labels.get((start, end), "") + text[end:]
    # the reference-list lines of removed URLs
    kept_lines = []
    for line in text.splitlines(keepends=True):
        if any(u in line for u in offending_urls) and _looks_like_reference(line):
            continue
        kept_lines.append(line)
    text = "".join(kept_lines)
    text = "\n".join(" ".join(part.split(" ")).rstrip() for part in text.split("\n")).strip()
    urls = list(dict.fromkeys(answer.citations[i].url for i in sorted(bad)))
    return Stripped(text, removed_claims, urls, len(answer.claims) - len(removed_claims))


def strip_structured(
    items: Sequence[Mapping[str, Any]], offending_urls: frozenset[str]
) -> tuple[list[dict[str, Any]], Stripped]:
    """The items of a structured answer without their failing URLs; an item left with no URL
    is removed with its claim."""
    bad = set(offending_urls) | normalize_all(offending_urls)
    kept: list[dict[str, Any]] = []
    claims: list[str] = []
    urls: list[str] = []
    for item in items:
        raw = item.get("url")
        item_urls = [raw] if isinstance(raw, str) else list(raw or [])
        good = [u for u in item_urls if u not in bad and not (normalize_all([u]) & bad)]
        urls.extend(u for u in item_urls if u not in good and u not in urls)
        if item_urls and not good:
            claims.append(str(item.get("claim", "")))
            continue
        kept.append({**item, "url": good if isinstance(raw, list) else (good[0] if good else raw)})
    text = "\n".join(str(i.get("claim", "")) for i in kept)
    return kept, Stripped(text, claims, urls, len(kept))


def _looks_like_reference(line: str) -> bool:
    s = line.strip()
    return bool(s) and (s[0] == "[" or s[0].isdigit() or s.startswith(("-", "*")))
