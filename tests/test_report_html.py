"""The HTML traffic report as a file: self-contained, escaped, its figures drawn from the numbers;
and ``citeguard report`` on good and bad input (one line on stderr and exit 2, never a
traceback). The page in a real browser: tests/test_report_browser.py."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from report_traffic import HOSTILE, traffic

from citeguard.cli import main
from citeguard.report import build_report
from citeguard.report_html import render_html, safe_href

GENERATED = datetime(2026, 12, 3, 8, tzinfo=UTC)


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Tags:
    tags = _Tags()
    tags.feed(page)
    tags.close()
    return tags


def _page(**kw: Any) -> str:
    return render_html(build_report(traffic(), worst=20), generated=GENERATED, **kw)


def test_hostile_log_content_is_text_never_markup() -> None:
    page = _page(source="cases<script>.jsonl")
    tags = _parse(page)
    assert not [t for t, _ in tags.tags if t in ("script", "img", "iframe", "object", "embed")]
    handlers = [(t, a) for t, attrs in tags.tags for a in attrs if a.startswith("on")]
    assert handlers == []
    # the hostile strings are on the page, as text: escaped in the source
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert HOSTILE in "".join(tags.text)
    assert "cases<script>.jsonl" in "".join(tags.text)
    # a javascript: URL is never a link; every link is http(s) (or the empty favicon)
    hrefs = [a["href"] for _, a in tags.tags if a.get("href") is not None]
    assert hrefs and all(h is not None and re.match(r"https?://|data:,$", h) for h in hrefs)
    assert "javascript:window.__pwned=3" not in hrefs
    assert "javascript:window.__pwned=3" not in [a.get("src") for _, a in tags.tags]


def test_page_is_self_contained() -> None:
    page = _page()
    tags = _parse(page)
    # nothing is fetched: no external stylesheet, script, font, image or frame
    for tag, attrs in tags.tags:
        assert attrs.get("src") is None, tag
        if tag == "link":
            assert attrs == {"rel": "icon", "href": "data:,"}
    assert "@import" not in page and "url(" not in page
    [csp] = [a for t, a in tags.tags if t == "meta" and a.get("http-equiv")]
    assert csp["content"] is not None and csp["content"].startswith("default-src 'none'")
    assert page.startswith("<!doctype html>")


def test_figures_are_drawn_from_the_report() -> None:
    report = build_report(traffic(), worst=20)
    tags = _parse(render_html(report, generated=GENERATED))
    figures = [a["id"] for t, a in tags.tags if t == "figure"]
    assert figures == ["fig-axes", "fig-timeline", "fig-findings", "fig-statuses"]
    svgs = [a for t, a in tags.tags if t == "svg"]
    assert len(svgs) == 4 and all(
        int(a["width"] or 0) > 0 and int(a["height"] or 0) > 0 for a in svgs
    )
    # the axis bars: one per failing axis, as long as its failure rate
    bars = [a for t, a in tags.tags if t == "rect" and a.get("class") == "bar"]
    rates = {a.axis: a.failure_rate for a in report.axes}
    axes_bars = bars[: sum(1 for r in rates.values() if r)]
    track = 760 - 210 - 140
    assert [float(a["width"] or 0) for a in axes_bars] == [
        round(track * r, 2) for r in rates.values() if r
    ]
    # the timeline: a line per evaluated axis through each day, a column of cases per day
    paths = [a for t, a in tags.tags if t == "path" and a.get("class") == "series"]
    assert len(paths) == 3  # validity, diversity, query (freshness never evaluated)
    assert report.timeline is not None
    assert all((a["d"] or "").count("L") == len(report.timeline.buckets) - 1 for a in paths)
    columns = [a for t, a in tags.tags if t == "rect" and a.get("class") == "volume"]
    assert len(columns) == len(report.timeline.buckets) == 8
    heights = [float(a["height"] or 0) for a in columns]
    assert heights[-1] == 50.0 and heights[0] == pytest.approx(50 * 2 / 3, abs=0.01)


def test_worst_answers_link_their_passages() -> None:
    report = build_report(traffic(), worst=20)
    tags = _parse(render_html(report, generated=GENERATED))
    passages = [a["href"] for t, a in tags.tags if t == "a" and a.get("class") == "passage"]
    fragments = [c.text_fragment_url for w in report.worst for c in w.citations]
    assert passages == [f for f in fragments if f]
    assert any(p and "#:~:text=the%20crew%20will%20orbit%20the%20Moon" in p for p in passages)
    articles = [a for t, a in tags.tags if t == "article"]
    assert len(articles) == len(report.worst) == 12


def test_worst_answers_show_the_per_claim_view() -> None:
    report = build_report(traffic(), worst=20)
    claims = [c for w in report.worst for c in w.claims]
    assert claims and any(c.gated for c in claims) and any(c.evidence for c in claims)
    page = render_html(report, generated=GENERATED)
    tags = _parse(page)
    rows = [a for t, a in tags.tags if t == "tr" and "claim-row" in (a.get("class") or "")]
    assert len(rows) == len(claims)
    assert [("gated" in (a.get("class") or "")) for a in rows] == [c.gated for c in claims]
    links = [a["href"] for t, a in tags.tags if t == "a" and a.get("class") == "evidence"]
    assert links == [c.text_fragment_url for c in claims if c.text_fragment_url]
    text = " ".join(tags.text)
    for c in claims:
        assert c.text in text and (c.label or "—") in text
        if c.probability is not None:
            assert f"P {c.probability:.2f}" in text
    # a hostile page's words in the evidence window are text, never markup
    assert any("<b>nothing</b>" in (c.evidence or "") for c in claims)
    assert "“a page that says <b>nothing</b>”" in text


def test_a_log_without_timestamps_or_failures_says_so() -> None:
    cases = [c for c in traffic() if c["verdict"]["passed"]]
    for c in cases:
        del c["timestamp"]
    page = render_html(build_report(cases), generated=GENERATED)
    tags = _parse(page)
    assert [a["id"] for t, a in tags.tags if t == "figure"] == ["fig-axes", "fig-statuses"]
    text = " ".join("".join(tags.text).split())
    assert "No case carries a timestamp" in text and "No answer failed." in text
    empty = _parse(render_html(build_report([]), generated=GENERATED))
    assert [a["id"] for t, a in empty.tags if t == "figure"] == ["fig-axes"]


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://example.com/a#:~:text=x%20y", True),
        ("HTTP://EXAMPLE.COM/", True),
        ("javascript:alert(1)", False),
        (" javascript:alert(1)", False),
        ("https://example.com/a b", False),
        ("https://example.com/\x00", False),
        ('https://example.com/"onmouseover="x', False),
        ("data:text/html,<script>", False),
        ("//example.com/", False),
        ("", False),
        (None, False),
    ],
)
def test_safe_href(url: str | None, safe: bool) -> None:
    assert (safe_href(url) is not None) is safe


# --------------------------------------------------------------------------------------------
# citeguard report, in process
# --------------------------------------------------------------------------------------------


def _log(tmp_path: Path, extra: bytes = b"") -> Path:
    log = tmp_path / "cases.jsonl"
    log.write_bytes(b"".join(json.dumps(c).encode() + b"\n" for c in traffic()) + extra)
    return log


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    rc = main(list(argv), out=out)
    err = capsys.readouterr().err
    return rc, out.getvalue(), err


def test_report_writes_html_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path)
    html = tmp_path / "report.html"
    rc, out, err = _run(capsys, "report", str(log), "--html", str(html), "--json", "--worst", "3")
    assert rc == 0 and err == ""
    data = json.loads(out)
    assert data["cases"] == 20 and len(data["worst"]) == 3
    assert data["timeline"]["bucket"] == "day" and data["timeline"]["untimed"] == 1
    page = html.read_text(encoding="utf-8")
    assert "<title>citeguard traffic report</title>" in page and "cases.jsonl" in page
    rc, out, err = _run(capsys, "report", str(log))
    assert rc == 0 and out.startswith("cases: 20  passed: 8")


def test_report_skips_a_bad_line_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, b"{not json\n\xff\xfe garbage\n")
    rc, out, err = _run(capsys, "report", str(log), "--json")
    assert rc == 0
    assert err.splitlines() == [
        f"citeguard: warning: {log}: skipped 2 of 22 lines "
        "(line 21: not JSON (Expecting property name enclosed in double quotes at column 2))"
    ]
    data = json.loads(out)
    assert data["cases"] == 20 and data["skipped_count"] == 2
    assert data["skipped"][1] == "line 22: not UTF-8 (byte 0xff at offset 0)"


def _bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"prompt": "café", "verdict": {}}\n'.encode("latin-1") * 3)
    utf16 = tmp_path / "utf16.jsonl"
    utf16.write_bytes('{"verdict": {}}\n'.encode("utf-16"))
    binary = tmp_path / "cases.bin"
    binary.write_bytes(bytes(range(256)))
    notcases = tmp_path / "notcases.jsonl"
    notcases.write_text('{"a": 1}\n[]\n')
    log = _log(tmp_path)
    return [
        (["report", str(latin1)], "no case could be read (3 skipped; line 1: not UTF-8"),
        (["report", str(utf16)], "is UTF-16 or UTF-32 text"),
        (["report", str(binary)], "looks binary"),
        (["report", str(notcases)], "line 1: verdict is missing or not an object"),
        (["report", str(tmp_path / "missing.jsonl")], "no such file"),
        (["report", str(tmp_path)], "is a directory, not a JSONL log"),
        (["report", str(log), "--html", str(tmp_path)], "is a directory"),
        (["report", str(log), "--html", str(tmp_path / "no" / "r.html")], "cannot write"),
        (["report", str(log), "--worst", "-1"], "expected 0 or more"),
        (["report", str(log), "--worst", "many"], "expected a whole number"),
    ]


def test_report_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, says in _bad_inputs(tmp_path):
        rc, out, err = _run(capsys, *argv)
        assert rc == 2, argv
        assert says in err, (argv, err)
        assert "Traceback" not in err and out == ""
        lines = [line for line in err.splitlines() if not line.startswith("usage:")]
        assert len(lines) == 1, (argv, err)  # argparse adds its usage line before its own
