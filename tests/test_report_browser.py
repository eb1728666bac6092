"""The HTML traffic report in headless Chromium, as a team member opens it: the file loads with
no console error, no failed or outside request and no script run, and every figure is shown
(its SVG laid out at a non-zero size, its bars and lines drawn).

Playwright drives the system Chromium (``apt-get install chromium``; scripts/test installs it):
it cannot download a browser here, so it is launched with ``executable_path``. Without a
Chromium (or without playwright) the test skips on a developer's machine and fails in CI
(``CI=true``), where the browser check is part of the gate.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_traffic import HOSTILE, traffic

from citeguard.cli import main

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}: the HTML report's browser test must run in CI")
    pytest.skip(why)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (playwright's ``Browser``), shared by this module's tests."""
    path = next((p for p in map(shutil.which, _BROWSERS) if p), None)
    if path is None:
        _missing("no chromium on PATH (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (the test extra)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def report_page(tmp_path: Path) -> Path:
    """``citeguard report cases.jsonl --html report.html`` over the test traffic."""
    log = tmp_path / "cases.jsonl"
    log.write_text("".join(json.dumps(c) + "\n" for c in traffic()), encoding="utf-8")
    html = tmp_path / "report.html"
    assert main(["report", str(log), "--html", str(html), "--worst", "20"], out=io.StringIO()) == 0
    return html


def test_report_loads_cleanly_and_shows_its_figures(chromium: Any, report_page: Path) -> None:
    page = chromium.new_page(viewport={"width": 1100, "height": 900})
    problems: list[str] = []
    requests: list[str] = []
    page.on(
        "console",
        lambda m: (
            problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on("request", lambda r: requests.append(r.url))
    url = report_page.as_uri()
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok
    assert problems == []
    assert requests == [url]  # one file: nothing else is fetched

    # every figure is laid out and visible, at a non-zero size
    figures = page.locator("figure.chart svg")
    assert figures.count() == 4
    for i in range(figures.count()):
        svg = figures.nth(i)
        assert svg.is_visible()
        box = svg.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 50, i
    ids = page.eval_on_selector_all("figure.chart", "fs => fs.map(f => f.id)")
    assert ids == ["fig-axes", "fig-timeline", "fig-findings", "fig-statuses"]

    # the marks inside them are drawn: bars with width, lines with length, columns with height
    def sizes(selector: str) -> list[tuple[float, float]]:
        return [
            (b["width"], b["height"])
            for b in page.eval_on_selector_all(
                selector,
                "els => els.map(e => { const r = e.getBoundingClientRect();"
                " return {width: r.width, height: r.height}; })",
            )
        ]

    axis_bars = sizes("#fig-axes rect.bar")
    assert len(axis_bars) == 3 and all(w > 10 and h > 5 for w, h in axis_bars)
    lines = sizes("#fig-timeline path.series")
    assert len(lines) == 3 and all(w > 300 for w, _ in lines)
    points = page.locator("#fig-timeline circle")
    assert points.count() == 3 * 8
    columns = sizes("#fig-timeline rect.volume")
    assert len(columns) == 8 and all(h > 0 for _, h in columns)
    assert len(sizes("#fig-statuses rect.bar")) == 4
    assert len(sizes("#fig-findings rect.bar")) == 3

    # hostile log content is shown as text and never runs
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("script").count() == 0 and page.locator("article img").count() == 0
    assert HOSTILE in page.locator("#worst").inner_text()
    # each citation links the page scrolled to its passage
    passage = page.locator("a.passage").first
    href = passage.get_attribute("href")
    assert href is not None and "#:~:text=" in href and passage.is_visible()
    page.screenshot(path=str(report_page.with_suffix(".png")), full_page=True)
    page.close()


def test_report_without_timestamps_loads_cleanly(chromium: Any, tmp_path: Path) -> None:
    log = tmp_path / "cases.jsonl"
    log.write_text(
        "".join(
            json.dumps({k: v for k, v in c.items() if k != "timestamp"}) + "\n" for c in traffic()
        )
    )
    html = tmp_path / "report.html"
    assert main(["report", str(log), "--html", str(html)], out=io.StringIO()) == 0
    page = chromium.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(html.as_uri())
    assert problems == []
    assert page.locator("figure.chart svg").count() == 3
    assert "No case carries a timestamp" in page.locator("#timeline").inner_text()
    page.close()


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        _missing("no chromium on PATH")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _missing("no chromium on PATH")
