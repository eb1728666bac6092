"""Smoke test of the benchmark suite: every scenario at its tiniest, so the suite cannot rot.

No timing asserts (speed targets live in the suite's own report); this checks that each
scenario runs against the real loopback web, real tools and real data, and returns results of
the documented shape with finite, positive ratios.
"""

from __future__ import annotations

import gc
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.__main__ import main, run_suite, write_results  # noqa: E402
from benchmarks.scenarios import SCENARIOS, Config  # noqa: E402
from benchmarks.web import LoopbackWeb, build_answer, delay_ms  # noqa: E402

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="127.0.0.2+ loopback is Linux"),
    # the module's fixture runs every scenario (~60 s on a 2-core machine), inside the first
    # test's time
    pytest.mark.timeout(600),
    # scripts/test gives each worker whole files (--dist loadfile), so the fixture runs once,
    # beside the other files (it asserts the results' shapes, no timing: a loaded machine
    # changes figures, not shapes)
]


def _positive(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def suite() -> dict[str, Any]:
    import asyncio

    return asyncio.run(run_suite(Config(seed=3, size="smoke"), list(SCENARIOS), log=False))


def test_web_is_deterministic_and_serves_real_pages() -> None:
    with LoopbackWeb(5, n_hosts=3) as web:
        a = web.plan(6, tag="x", distinct_pages=True)
        b = web.plan(6, tag="x", distinct_pages=True)
        assert a == b
        assert [u.delay_ms for u in a] == [u.delay_ms for u in b]
        answer = build_answer(web, a)
        assert all(web.url(u) in answer for u in a)
        resolver = web.resolver()
        assert resolver.hosts == {h.name for h in web.hosts}
    assert all(h.kind == "fixed" for h in web.hosts)  # the first hosts have fixed latencies
    if (DATA / "passages" / "passages.jsonl").is_file():
        assert not web.pages.generated
    from benchmarks.web import DEFAULT_HOSTS

    slow = next(h for h in DEFAULT_HOSTS if h.kind == "lognormal")
    assert delay_ms(1, slow, "/p/1/a") == delay_ms(1, slow, "/p/1/a")
    assert delay_ms(1, DEFAULT_HOSTS[-1], "/p/1/a") is None  # the timeout host


def test_guard_latency(suite: dict[str, Any]) -> None:
    g = suite["scenarios"]["guard"]
    assert g["rows"], g
    for row in g["rows"].values():
        assert _positive(row["ratio_median"]) and _positive(row["guard_ms_median"])
        assert _positive(row["slowest_alone_ms_median"])
        assert sum(row["statuses"].values()) >= row["citations"]
    assert {r["entailment"] for r in g["rows"].values()} == set(g["modes"])
    to = g["timeout_answer"]
    assert _positive(to["ratio_to_url_timeout_median"])
    assert to["statuses"].get("timeout", 0) >= 1


def test_guard_long_pages(suite: dict[str, Any]) -> None:
    g = suite["scenarios"]["guard_long"]
    assert g["pages"]["bytes_min"] >= 50_000 and g["pages"]["bytes_max"] <= 150_000
    for row in g["rows"].values():
        assert _positive(row["ratio_median"]) and _positive(row["guard_ms_per_claim_median"])
        assert sum(row["statuses"].values()) >= row["citations"]


def test_report_scale(suite: dict[str, Any]) -> None:
    r = suite["scenarios"]["report_scale"]
    for row in r["rows"].values():
        assert _positive(row["ratio_to_slowest_median"]) and _positive(row["fetch_floor_ms_median"])
        for run in row["runs"]:
            # every source has a citation with a status; the 404s planned are found
            assert sum(run["statuses"].values()) >= run["sources"]
            assert run["guard_ms"] >= run["slowest_alone_ms"] * 0.5


def test_longpage_support(suite: dict[str, Any]) -> None:
    lp = suite["scenarios"]["longpage"]
    if not (DATA / "claims" / "wice_train.jsonl").is_file():
        assert lp["rows"] == 0
        return
    assert lp["rows"] > 0
    for key, block in lp["summary"].items():
        assert "held_out" not in key  # the scenario never reads held-out rows
        assert block["guard"]["rows"] == sum(block["statuses"].values())


def test_near_copy(suite: dict[str, Any]) -> None:
    nc = suite["scenarios"]["near_copy"]
    if not (DATA / "passages" / "passages.jsonl").is_file():
        assert "edits" not in nc
        return
    edits = nc["edits"]
    assert edits["by_kind"]["all"]["n"] == edits["altered_rows"] > 0
    for table in (edits["by_kind"], edits["unedited_by_language"]):
        for row in table.values():  # every answer ends clean, rejected or uncertain
            assert abs(row["clean"] + row["rejected"] + row["uncertain"] - 1.0) < 1e-3
    if (DATA / "claims" / "ocnli_dev.jsonl").is_file():
        assert "verbatim" in nc["chinese"]["cases"]
    assert nc["dev_control"]["all"]["supported_rows"] > 0


def test_throughput(suite: dict[str, Any]) -> None:
    t = suite["scenarios"]["throughput"]
    run = t["runs"]["20"]
    contenders = run["contenders"]
    assert {"citeguard", "aiohttp_head", "sequential"} <= set(contenders)
    for name, c in contenders.items():
        assert _positive(c["urls_per_s"]), name
    for name, r in run["throughput_ratios"].items():
        assert _positive(r), name
    # every checker agrees on which URLs are broken (404s), the redirects being followed
    broken = {name: c["tally"]["errors"] for name, c in contenders.items() if name != "sequential"}
    assert len(set(broken.values())) == 1, broken
    if t["lychee"] is None:
        assert "lychee_missing" in t
    if t["linkchecker"] is None:
        assert "linkchecker_missing" in t


def test_extraction(suite: dict[str, Any]) -> None:
    e = suite["scenarios"]["extract"]
    if not (DATA / "passages" / "passages.jsonl").is_file():
        assert "skipped" in e
        return
    assert e["pages"] == 2
    for name, r in e["ratios"].items():
        assert _positive(r), name


def test_entailment(suite: dict[str, Any]) -> None:
    en = suite["scenarios"]["entail"]
    for sets in en["backends"].values():
        for name in en["sets"]:
            assert _positive(sets[name]["pairs_per_second"])
    assert en["not_measured"]["judge"]


def test_snapshot(suite: dict[str, Any]) -> None:
    s = suite["scenarios"]["snapshot"]
    assert _positive(s["replay"]["median_ms"])
    assert _positive(s["replay_over_live_loopback"])


def test_inflight(suite: dict[str, Any]) -> None:
    i = suite["scenarios"]["inflight"]
    assert i["answers"] == 10
    assert _positive(i["answers_per_s"]) and _positive(i["ratio_wall_vs_bare_aiohttp"])
    assert math.isfinite(i["loop_lag_p99_ms_median"])
    assert _positive(i["tracemalloc_peak_mb"])
    assert i["attempts"] >= i["answers"]
    # the guard closes what it opens: no descriptor outlives Guard.aclose()
    assert i["fds"]["leaked"] == 0, i["fds"]
    assert i["statuses"].get("timeout", 0) >= 1  # answer 0 cites the host that never answers
    # extraction in a worker process (Guard(extract_executor=...)) gives the same verdicts
    pooled = i["process_pool"]
    assert _positive(pooled["answers_per_s"])
    # the same verdicts, save where a URL timed out in either pass (the load decides those)
    timely = [
        (a[0], b[0])
        for a, b in zip(i["outcomes"], pooled["outcomes"], strict=True)
        if not (a[2] or b[2])
    ]
    assert timely and all(x == y for x, y in timely), (i["outcomes"], pooled["outcomes"])


def test_load_and_stalls(suite: dict[str, Any]) -> None:
    # the load's last run: every citation of every check has a status
    lo = suite["scenarios"]["load"]
    assert lo["checks"] * lo["citations_per_check"] == sum(lo["statuses"].values())
    assert {r["variant"] for r in lo["runs"]} == {"default", "gc_frozen", "tuned"}
    assert all(r["loop_lag"]["ticks"] > 0 for r in lo["runs"])
    assert all(r["gc_pause_max_generation"] in (-1, 0, 1, 2) for r in lo["runs"])
    st = suite["scenarios"]["stalls"]
    assert st["idle_full_gc_ms"] > 0 and st["idle_tracked_objects"] > 1000
    assert {"url_www_host_of_dots", "markers_33k", "bare_urls_2000"} <= set(st["inputs"])
    assert all(v["loop_lag"]["loop_cpu_max_ms"] >= 0 for v in st["inputs"].values())
    # the tuned-runtime pass ran, and left the interpreter as it found it
    assert st["tuned"] and st["tuned_worst_stall_ms"] >= 0
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[2] < 10**6


def test_soft404_load(suite: dict[str, Any]) -> None:
    # templated pages that differ only in their facts, some 404 metres tall: none a soft 404;
    # the real not-found pages (one per covered language) all are
    s4 = suite["scenarios"]["soft404_load"]
    assert s4["citations"] == sum(s4["statuses"].values())
    assert s4["pages_stating_404_metres"] > 0
    assert s4["false_soft_404"] == 0, s4["false_soft_404_examples"]
    assert s4["control_soft_404"] == s4["control_not_found_pages"] == 7


def test_axes(suite: dict[str, Any]) -> None:
    a = suite["scenarios"]["axes"]
    for name, r in a["ratios"].items():
        assert _positive(r), name


def test_quotes(suite: dict[str, Any]) -> None:
    q = suite["scenarios"]["quotes"]
    if not (DATA / "passages" / "passages.jsonl").is_file():
        assert "skipped" in q
        pytest.skip("needs shared/data/passages")
    assert q["pages"] == 4
    assert q["server"]["requests"] > 0
    assert set(q["configs"]) == {"default", "entailment_off"}
    for name, c in q["configs"].items():
        assert c["entailment"] is (name == "default")
        for t in ("bare", "frame", "inline_link", "added_content"):
            block = c["templates"][t]
            assert block["answers"] == 4, (name, t)
            assert 0.0 <= block["accepted_share"] <= 1.0
            assert sum(block["statuses"].values()) == 4
            assert "not_found" not in block["statuses"]  # each page is served at its own URL
            assert len(block["top_reject_reasons"]) <= 5
        assert 0.0 <= c["no_content_accepted_share_min"] <= 1.0
    (row,) = q["targets"]
    assert row["name"].startswith("verbatim quotes accepted") and row["target"] == ">= 0.98"


def test_scholarly(suite: dict[str, Any]) -> None:
    sc = suite["scenarios"]["scholarly"]
    if "skipped" in sc:
        pytest.skip(sc["skipped"])  # the shared data is absent
    for half in ("tune", "held_out"):
        overall = sc[half]["overall"]
        assert overall["n"] > 0
        assert all(0 <= overall[k] <= 1 for k in ("detected", "false_positive", "f1"))
        assert set(sc[half]["per_style"]) == {"apa", "bibtex"}
    assert [t["name"] for t in sc["targets"]] == [
        "held-out: hallucinated detected",
        "held-out: real flagged",
        "held-out: every kind detected",
    ]


def test_report_files(suite: dict[str, Any], tmp_path: Path) -> None:
    paths = write_results(suite, tmp_path)
    names = {p.name for p in paths}
    assert {"suite.json", "SUMMARY.md", "guard_latency.png", "throughput.png"} <= names
    data = json.loads((tmp_path / "suite.json").read_text())
    assert set(data["scenarios"]) == set(SCENARIOS)
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "## Targets" in summary and "slowest URL" in summary
    for p in paths:
        assert p.stat().st_size > 0


def test_cli_only_merges_previous_results(suite: dict[str, Any], tmp_path: Path) -> None:
    write_results(suite, tmp_path)
    assert main(["--size", "smoke", "--only", "axes", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "suite.json").read_text())
    assert set(data["scenarios"]) == set(SCENARIOS)  # the others kept from the previous run
    assert data["meta"]["merged_from_previous"]
    with pytest.raises(SystemExit):
        main(["--only", "nope", "--out", str(tmp_path)])
