"""The traffic report as one HTML page a team opens: ``citeguard report cases.jsonl --html FILE``.

:func:`render_html` turns a :class:`~citeguard.report.TrafficReport` into a single
self-contained file: inline CSS, inline SVG figures drawn here (no script, no font, no request:
a ``Content-Security-Policy`` of ``default-src 'none'`` says so to the browser too). The page
shows the per-axis failure rates, the rates over time when the cases carry timestamps, the
clustered findings, the cited URLs' statuses, and the worst answers with each citation linked to
its text-fragment deep link (the page scrolled to the passage the guard matched).

Everything on the page that came from a log (prompts, answers, page titles, URLs, finding
messages) is hostile input. The Jinja2 environment autoescapes every value, the template never
marks one safe, and a URL becomes a link only when it is plain ``http(s)``; the figures' geometry
is computed here from numbers only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader, StrictUndefined

from citeguard.models import AXES, CitationStatus, Outcome
from citeguard.report import BucketSize, Timeline, TrafficReport

__all__ = ["render_html", "safe_href"]

# Okabe–Ito: told apart by colour-blind readers too
_AXIS_COLOURS = {
    "validity": "#0072B2",
    "diversity": "#E69F00",
    "freshness": "#009E73",
    "query": "#CC79A7",
}
_OTHER_COLOUR = "#666666"
_STATUS_COLOURS = {
    "ok": "#009E73",  # the citation holds
    "content": "#CC79A7",  # the page resolves but does not back the claim
    Outcome.BROKEN.value: "#D55E00",
    Outcome.UNVERIFIABLE.value: "#999999",
}

_WIDTH = 760  # every figure's width in CSS pixels (the page scales it down on narrow screens)
_LABEL_W = 210  # the label column of a bar chart
_VALUE_W = 140  # the value column
_ROW_H = 26
_BAR_H = 16
_MAX_CLUSTER_BARS = 12

_HREF_RE = re.compile(r"https?://[^\s\x00-\x1f\x7f<>\"'`]+", re.IGNORECASE)


def safe_href(url: str | None) -> str | None:
    """``url`` when a browser may follow it from the report (plain ``http``/``https``, nothing
    a browser would strip or reinterpret first), else None: ``javascript:``, ``data:`` and
    the like stay text."""
    if not url or len(url) > 8192:
        return None
    return url if _HREF_RE.fullmatch(url) else None


# --------------------------------------------------------------------------------------------
# Figure geometry (numbers and labels only; the template draws it)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    label: str
    value: str  # the text right of the bar: "25% (3 of 12)"
    title: str  # the tooltip
    y: float
    width: float  # of the bar; the track is the chart's bar_w
    colour: str


@dataclass(frozen=True)
class BarChart:
    id: str
    title: str
    bars: list[Bar]
    width: int = _WIDTH
    label_w: int = _LABEL_W
    bar_w: int = _WIDTH - _LABEL_W - _VALUE_W
    row_h: int = _ROW_H
    bar_h: int = _BAR_H

    @property
    def height(self) -> int:
        return max(len(self.bars), 1) * self.row_h + 8


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str


@dataclass(frozen=True)
class Series:
    axis: str
    colour: str
    path: str  # SVG path data: "M x y L x y ..." (a gap where the axis was not evaluated)
    points: list[Point]


@dataclass(frozen=True)
class Column:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


# the line chart's layout: the plot, its x labels, then the strip of case counts
_LEFT, _TOP, _PLOT_W, _PLOT_H = 48, 12, _WIDTH - 48 - 24, 200
_STRIP_TOP, _STRIP_H = _TOP + _PLOT_H + 34, 50


@dataclass(frozen=True)
class LineChart:
    id: str
    title: str
    series: list[Series]
    columns: list[Column]  # cases per bucket, in the strip under the rates
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    volume_max: int
    width: int = _WIDTH
    left: int = _LEFT
    top: int = _TOP
    plot_w: int = _PLOT_W
    plot_h: int = _PLOT_H
    strip_top: int = _STRIP_TOP
    strip_h: int = _STRIP_H

    @property
    def height(self) -> int:
        return self.strip_top + self.strip_h + 8


def _pct(rate: float) -> str:
    return f"{rate:.0%}" if rate >= 0.01 or rate == 0 else "<1%"


def _axes_chart(report: TrafficReport) -> BarChart:
    bar_w = _WIDTH - _LABEL_W - _VALUE_W
    bars: list[Bar] = []
    for i, a in enumerate(report.axes):
        if a.failure_rate is None:
            value, width, title = "not evaluated", 0.0, f"{a.axis}: never evaluated"
        else:
            value = f"{_pct(a.failure_rate)} ({a.failed} of {a.evaluated})"
            width = round(bar_w * a.failure_rate, 2)
            title = f"{a.axis}: failed in {a.failed} of {a.evaluated} answers"
        colour = _AXIS_COLOURS.get(a.axis, _OTHER_COLOUR)
        bars.append(Bar(a.axis, value, title, i * _ROW_H + 4, width, colour))
    return BarChart("fig-axes", "Failure rate per axis", bars)


def _clusters_chart(report: TrafficReport) -> BarChart | None:
    shown = report.clusters[:_MAX_CLUSTER_BARS]
    if not shown:
        return None
    bar_w = _WIDTH - _LABEL_W - _VALUE_W
    bars = []
    for i, c in enumerate(shown):
        share = c.count / c.total if c.total else 0.0
        bars.append(
            Bar(
                label=_short(c.key, 30),
                value=f"{_pct(share)} of {c.unit}",
                title=c.sentence,
                y=i * _ROW_H + 4,
                width=round(bar_w * share, 2),
                colour=_AXIS_COLOURS.get(c.axis, _OTHER_COLOUR),
            )
        )
    return BarChart("fig-findings", "Most common findings (share of answers or queries)", bars)


def _status_colour(status: str) -> str:
    try:
        known = CitationStatus(status)
    except ValueError:
        return _OTHER_COLOUR
    if known.is_ok():
        return _STATUS_COLOURS["ok"]
    if known.outcome is Outcome.RESOLVES:
        return _STATUS_COLOURS["content"]
    return _STATUS_COLOURS[known.outcome.value]


def _status_chart(report: TrafficReport) -> BarChart | None:
    if not report.citation_statuses:
        return None
    bar_w = _WIDTH - _LABEL_W - _VALUE_W
    top = max(report.citation_statuses.values())
    total = report.citations or 1
    bars = [
        Bar(
            label=status,
            value=f"{n:,} ({_pct(n / total)})",
            title=f"{status}: {n:,} of {report.citations:,} cited URLs",
            y=i * _ROW_H + 4,
            width=round(bar_w * n / top, 2),
            colour=_status_colour(status),
        )
        for i, (status, n) in enumerate(report.citation_statuses.items())
    ]
    return BarChart("fig-statuses", "Cited URLs by status", bars)


_BUCKET_FORMATS: dict[BucketSize, str] = {"hour": "%d %b %H:00", "day": "%d %b", "week": "%d %b"}
_BUCKET_TITLES: dict[BucketSize, str] = {
    "hour": "%Y-%m-%d %H:00 UTC",
    "day": "%Y-%m-%d",
    "week": "week of %Y-%m-%d",
}


def _timeline_chart(timeline: Timeline | None) -> LineChart | None:
    """Failure rate per axis in each bucket (x: time, y: 0–100 %) over a strip of case
    counts; None with fewer than two buckets (nothing to draw a line through)."""
    if timeline is None or len(timeline.buckets) < 2:
        return None
    buckets = timeline.buckets
    t0 = buckets[0].start.timestamp()
    span = buckets[-1].start.timestamp() - t0
    step = _PLOT_W / len(buckets)  # the width a bucket's column may take

    def x_of(start: datetime) -> float:
        return round(_LEFT + step / 2 + (_PLOT_W - step) * (start.timestamp() - t0) / span, 2)

    def y_of(rate: float) -> float:
        return round(_TOP + _PLOT_H * (1 - rate), 2)

    fmt, title_fmt = _BUCKET_FORMATS[timeline.bucket], _BUCKET_TITLES[timeline.bucket]
    axes = [a.axis for a in buckets[0].axes]
    series: list[Series] = []
    for axis in axes:
        path: list[str] = []
        points: list[Point] = []
        pen_down = False
        for b in buckets:
            stats = next((s for s in b.axes if s.axis == axis), None)
            if stats is None or stats.failure_rate is None:
                pen_down = False
                continue
            x, y = x_of(b.start), y_of(stats.failure_rate)
            path.append(f"{'L' if pen_down else 'M'}{x} {y}")
            pen_down = True
            when = b.start.strftime(title_fmt)
            points.append(
                Point(
                    x,
                    y,
                    f"{axis}, {when}: {_pct(stats.failure_rate)} "
                    f"({stats.failed} of {stats.evaluated})",
                )
            )
        if points:
            series.append(
                Series(axis, _AXIS_COLOURS.get(axis, _OTHER_COLOUR), " ".join(path), points)
            )
    top = max(b.cases for b in buckets)
    col_w = max(min(step * 0.7, 40.0), 1.0)
    columns = []
    for b in buckets:
        h = round(_STRIP_H * b.cases / top, 2)
        columns.append(
            Column(
                x=round(x_of(b.start) - col_w / 2, 2),
                y=round(_STRIP_TOP + _STRIP_H - h, 2),
                width=round(col_w, 2),
                height=h,
                title=f"{b.start.strftime(title_fmt)}: {b.cases:,} cases, {b.passed:,} passed",
            )
        )
    y_ticks = [Tick(y_of(r), f"{r:.0%}") for r in (0.0, 0.25, 0.5, 0.75, 1.0)]
    every = max(1, -(-len(buckets) // 7))  # at most ~7 labels
    x_ticks = [Tick(x_of(b.start), b.start.strftime(fmt)) for b in buckets[::every]]
    return LineChart(
        "fig-timeline",
        f"Failure rate per {timeline.bucket} (the strip: cases per {timeline.bucket})",
        series,
        columns,
        y_ticks,
        x_ticks,
        top,
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------


def _environment() -> Environment:
    # one environment per rendering: nothing cached across reports (no module state)
    env = Environment(
        loader=PackageLoader("citeguard", "templates"),
        autoescape=True,  # every value; the template marks nothing safe
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["href"] = safe_href
    env.filters["pct"] = _pct
    env.globals["axis_colour"] = lambda axis: _AXIS_COLOURS.get(str(axis), _OTHER_COLOUR)
    env.globals["status_colour"] = _status_colour
    return env


def render_html(
    report: TrafficReport,
    *,
    source: str | None = None,
    generated: datetime | None = None,
    title: str = "citeguard traffic report",
) -> str:
    """The report as one self-contained HTML document (module docstring). ``source``: the log
    it was read from, shown in the header; ``generated``: the time shown (default: now)."""
    when = (generated or datetime.now(UTC)).astimezone(UTC)
    timeline = report.timeline
    figures: Sequence[BarChart | LineChart | None] = (
        _axes_chart(report),
        _timeline_chart(timeline),
        _clusters_chart(report),
        _status_chart(report),
    )
    axes_fig, timeline_fig, clusters_fig, status_fig = figures
    span = None
    if timeline is not None and timeline.buckets:
        fmt = _BUCKET_TITLES[timeline.bucket]
        span = (timeline.buckets[0].start.strftime(fmt), timeline.buckets[-1].start.strftime(fmt))
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=title,
        report=report,
        source=source,
        generated=when.strftime("%Y-%m-%d %H:%M UTC"),
        span=span,
        axes_fig=axes_fig,
        timeline_fig=timeline_fig,
        clusters_fig=clusters_fig,
        status_fig=status_fig,
        known_axes=AXES,
        pass_rate=(report.passed / report.cases) if report.cases else None,
    )
