"""Plain-text rendering at the edge: the one table renderer, and the verdict views built on it.

:func:`table` is the only place that pads, aligns and trims cells; the ``check`` output, the
demo, ``citeguard report`` and ``citeguard snapshot`` all draw their tables with it.
Library code never prints: these functions return strings for the command line to write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from citeguard.models import Finding, GuardResult, Severity, Verdict

__all__ = [
    "Column",
    "render_claims",
    "render_result",
    "render_vector",
    "render_verdict",
    "render_warnings",
    "table",
    "trim",
]


@dataclass(frozen=True)
class Column:
    """One column of a :func:`table`.

    ``width``: ``None`` fits the widest cell (and the header); a number pads every cell to it
    (a longer cell overflows, unless ``trim``). ``trim``: cut cells longer than ``width`` to
    ``width`` characters, the last one an ellipsis. ``gap``: the text before this column
    (``None``: the table's ``sep``; ignored on the first column).
    """

    header: str
    width: int | None = None
    align: Literal["left", "right"] = "left"
    trim: bool = False
    gap: str | None = None


def trim(text: str | None, width: int) -> str:
    """``text`` cut to ``width`` characters, the last one ``…`` when anything was cut."""
    text = text or ""
    return text if len(text) <= width else text[: width - 1] + "…"


def table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str] | str],
    *,
    sep: str = "  ",
    rstrip: bool = True,
) -> str:
    """A header line, then one line per row; lines joined by newlines, no trailing newline.

    A row that is a plain string is a free line (a note under the row above): written as it
    is, never measured or padded. ``rstrip`` drops trailing spaces of each line.
    """
    cells = [
        [
            trim(c, col.width) if col.trim and col.width is not None else c
            for col, c in zip(columns, row, strict=True)
        ]
        for row in rows
        if not isinstance(row, str)
    ]
    widths = [
        col.width if col.width is not None else max([len(col.header), *(len(r[i]) for r in cells)])
        for i, col in enumerate(columns)
    ]

    def line(values: Sequence[str]) -> str:
        parts: list[str] = []
        for i, (col, value) in enumerate(zip(columns, values, strict=True)):
            if i:
                parts.append(sep if col.gap is None else col.gap)
            parts.append(value.rjust(widths[i]) if col.align == "right" else value.ljust(widths[i]))
        text = "".join(parts)
        return text.rstrip() if rstrip else text

    out = [line([c.header for c in columns])]
    measured = iter(cells)
    for row in rows:
        out.append(row if isinstance(row, str) else line(next(measured)))
    return "\n".join(out)


# ---------------------------------------------------------------------- verdicts

_NOTE = " " * 28  # notes under a citation line up with its URL column
_CITATION_COLUMNS = (
    Column("STATUS", width=22),
    Column("HTTP", width=4, align="right", gap=" "),
    Column("URL → FINAL URL", width=60, trim=True),
    Column("REASON", width=0),
)


_CLAIM_NOTE = " " * 6  # notes under a claim line up with its SUPPORT column
_CLAIM_COLUMNS = (
    Column("CLAIM", width=4, align="right"),
    Column("SUPPORT", width=14),
    Column("P", width=4, align="right"),
    Column("BACKEND", width=12, trim=True),
    Column("GATED", width=5),
    Column("TEXT", width=0),
)


def render_claims(verdict: Verdict) -> str:
    """The per-claim view: each claim's support label, P(supported), backend, whether it
    gated (caused a hard reject), then its citations and the evidence window with its link."""
    rows: list[Sequence[str] | str] = []
    for c in verdict.claims:
        label = c.label or ("cites nothing" if not c.checks else "settled" if c.supported else "-")
        prob = "-" if c.probability is None else f"{c.probability:.2f}"
        rows.append(
            (
                str(c.index),
                label,
                prob,
                c.backend or "-",
                "yes" if c.gated else "-",
                trim(c.text, 90),
            )
        )
        for check in c.checks:
            mark = " (gated)" if check.gated else ""
            rows.append(f"{_CLAIM_NOTE}{check.status.value}{mark}: {check.url}")
        if c.evidence:
            rows.append(f"{_CLAIM_NOTE}evidence: “{trim(' '.join(c.evidence.split()), 90)}”")
        if c.text_fragment_url:
            rows.append(f"{_CLAIM_NOTE}open at evidence: {c.text_fragment_url}")
    if not rows:
        return "claims: none found in the answer"
    return table(_CLAIM_COLUMNS, rows, rstrip=False)


def render_verdict(verdict: Verdict, *, title: str | None = None, claims: bool = False) -> str:
    """A per-citation table (then, with ``claims``, the per-claim view) plus the four-axis
    vector, for people."""
    rows: list[Sequence[str] | str] = []
    validity = verdict.axes.get("validity")
    # citations that passed with a claim's support unsettled: a note under each
    uncertain: dict[str, list[Finding]] = {}
    for f in validity.findings if validity is not None else ():
        if f.code == "validity.support_uncertain" and f.url is not None:
            uncertain.setdefault(f.url, []).append(f)
    for c in verdict.citations:
        code = str(c.http_status) if c.http_status is not None else "-"
        url = c.url if not c.final_url or c.final_url == c.url else f"{c.url} → {c.final_url}"
        rows.append((c.status.value, code, url, c.reason))
        if not c.cited_by_claim:
            rows.append(f"{_NOTE}shown in the answer, cited by no claim")
        if c.passage is not None and c.passage.matched_text:
            rows.append(
                f"{_NOTE}passage ({c.passage.how}, {c.passage.score:.0f}): "
                f"“{trim(c.passage.matched_text, 90)}”"
            )
        if c.entailment is not None:
            rows.append(
                f"{_NOTE}entailment: {c.entailment.label} "
                f"({c.entailment.score:.2f}, {c.entailment.backend})"
            )
        for f in uncertain.get(c.url, ()):
            rows.append(f"{_NOTE}{_uncertain_note(f)}")
        if c.text_fragment_url:
            rows.append(f"{_NOTE}open at passage: {c.text_fragment_url}")
    lines: list[str] = [title] if title else []
    for f in validity.findings if validity is not None else ():
        if f.code == "validity.entailment_fallback":  # how the claims were judged, first
            lines.append(f"claim support: {f.message}")
    lines.append(table(_CITATION_COLUMNS, rows, rstrip=False))
    if claims:
        lines.append(render_claims(verdict))
    lines.append(render_vector(verdict))
    lines.extend(render_warnings(verdict))
    for f in verdict.findings:
        lines.append(f"  note: {f.message}")
    return "\n".join(lines) + "\n"


# warnings printed elsewhere: how the claims were judged (above the table), a claim's support
# uncertain (under its citation)
_SHOWN_ELSEWHERE = frozenset({"validity.entailment_fallback", "validity.support_uncertain"})


def render_warnings(verdict: Verdict) -> list[str]:
    """Every warning of every axis (what is reported without failing by itself: a stale source
    under an uncertain regime, a missing recency caveat, a query's drift), one line each, with
    the citation and the claim it is about; those the table already shows under their citation
    aside."""
    lines = []
    for axis in verdict.axes.values():
        for f in axis.findings:
            if f.severity is not Severity.WARNING:
                continue
            if f.code in _SHOWN_ELSEWHERE and (f.url is not None or f.claim_index is None):
                continue
            # the citation, unless the message names it already
            about = [f"citation {f.url}"] if f.url is not None and f.url not in f.message else []
            if f.claim_index is not None:
                about.append(f"claim {f.claim_index + 1}")
            where = f" ({', '.join(about)})" if about else ""
            lines.append(f"  warning: {axis.name}{where}: {f.message}")
    return lines


def _uncertain_note(f: Finding) -> str:
    """``validity.support_uncertain`` under its citation: which claim, its P(supported) and the
    band it fell in."""
    p, band = f.details.get("p_supported"), f.details.get("thresholds")
    facts = f"P(supported) {p:.2f}" if isinstance(p, float) else ""
    if isinstance(band, list) and len(band) == 2:
        facts += f", between {band[0]:.2f} and {band[1]:.2f}"
    claim = f"claim {f.claim_index + 1}" if f.claim_index is not None else "a claim"
    return f"warning: support uncertain for {claim}" + (f" ({facts})" if facts else "")


# the scale each axis scores on, printed beside its score: the query axis rates each search on
# its 1-5 rubric (the worst one is the axis score), the others are fractions
_SCALES: dict[str, tuple[str, str]] = {"query": ("1–5", ".1f")}
_FRACTION = ("0–1", ".2f")


def render_vector(verdict: Verdict) -> str:
    """The verdict line (every axis: pass / FAIL / n/a, score with its scale, advisory), then
    the failing findings of the axes other than validity (validity's are in the citation
    table)."""
    parts = []
    for name, axis in verdict.axes.items():
        mark = "n/a" if not axis.evaluated else "pass" if axis.passed else "FAIL"
        scale, fmt = _SCALES.get(name, _FRACTION)
        score = f" {axis.score:{fmt}} ({scale})" if axis.score is not None else ""
        gate = "" if axis.gating else " (advisory)"
        parts.append(f"{name}: {mark}{score}{gate}")
    head = "PASSED" if verdict.passed else "REJECTED"
    lines = [f"verdict: {head}  |  " + "  |  ".join(parts)]
    for axis in verdict.axes.values():
        for f in axis.findings:
            if f.axis is not None and f.axis != "validity" and f.severity.value == "error":
                lines.append(f"  {axis.name}: {f.message}")
    return "\n".join(lines)


def render_result(result: GuardResult) -> str:
    """Every attempt's verdict, then the run's outcome."""
    chunks = []
    for a in result.attempts:
        chunks.append(render_verdict(a.verdict, title=f"== attempt {a.number} =="))
    chunks.append(f"outcome: {result.outcome} — {result.message}\n")
    return "\n".join(chunks)
