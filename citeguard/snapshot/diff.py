"""``show`` and ``diff`` of versions (pure; CPU cost is linear in the number of entries and
sub-ms for test stores)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from citeguard.models import FetchResult, SearchRecord, Verdict
from citeguard.snapshot.entries import (
    Entry,
    Hit,
    View,
    check_shape_key,
    decode_hit,
    split_key,
)
from citeguard.snapshot.records import (
    AxisMove,
    AxisSummary,
    CaseBaseline,
    ChangeKind,
    FetchEntry,
    PageChange,
    SearchChange,
    SnapshotDiff,
    VerdictChange,
    VersionDetail,
    VersionInfo,
)


def _detail(info: VersionInfo, views: Mapping[str, View]) -> VersionDetail:
    return VersionDetail(
        info=info,
        visible={layer: len(view) for layer, view in views.items()},
        fetches=[_fetch_entry(e) for e in sorted(views["fetch"].values(), key=_by_key)],
        baselines=[_baseline(e) for e in sorted(views["verdict"].values(), key=_by_key)],
    )


def _compute_diff(v1: int, v2: int, a: Mapping[str, View], b: Mapping[str, View]) -> SnapshotDiff:
    return SnapshotDiff(
        v1=v1,
        v2=v2,
        pages=_diff_fetches(a["fetch"], b["fetch"]),
        searches=_diff_searches(a["search"], b["search"]),
        verdicts=_diff_verdicts(a["verdict"], b["verdict"]),
    )


def _by_key(e: Entry) -> str:
    return e.key


def _as_hit(layer: str, e: Entry) -> Hit:
    """A view's entry (checked by the backend's ``_view``) as a :class:`Hit`, whose checks
    raise :class:`SnapshotEntryCorrupt` naming it."""
    return Hit("snapshot store", layer, e.key, e.version, e.data, e.body_hash, None, True)


def _parts(hit: Hit) -> list[str]:
    check_shape_key(hit)
    return split_key(hit.key)


def _fetch_entry(e: Entry) -> FetchEntry:
    hit = _as_hit("fetch", e)
    method, url = _parts(hit)
    r = decode_hit(FetchResult, hit)
    return FetchEntry(
        method=method,
        url=url,
        version=e.version,
        status=r.status,
        http_status=r.http_status,
        body_hash=e.body_hash,
        final_url=r.final_url,
    )


def _axes(v: Verdict) -> dict[str, AxisSummary]:
    return {
        name: AxisSummary(passed=a.passed, score=a.score, evaluated=a.evaluated)
        for name, a in sorted(v.axes.items())
    }


def _baseline(e: Entry) -> CaseBaseline:
    hit = _as_hit("verdict", e)
    (case_id,) = _parts(hit)
    v = decode_hit(Verdict, hit)
    return CaseBaseline(case_id=case_id, version=e.version, passed=v.passed, axes=_axes(v))


def _diff_fetches(a: View, b: View) -> list[PageChange]:
    out: list[PageChange] = []
    for key in sorted(a.keys() | b.keys()):
        before = _fetch_entry(a[key]) if key in a else None
        after = _fetch_entry(b[key]) if key in b else None
        ref = after or before
        assert ref is not None
        if before is not None and after is not None:
            same = (
                before.body_hash == after.body_hash
                and before.status == after.status
                and before.http_status == after.http_status
                and before.final_url == after.final_url
            )
            if same:
                continue
        change: ChangeKind = (
            "added" if before is None else "removed" if after is None else "changed"
        )
        out.append(
            PageChange(
                method=ref.method,
                url=ref.url,
                change=change,
                status_before=before.status if before else None,
                status_after=after.status if after else None,
                http_status_before=before.http_status if before else None,
                http_status_after=after.http_status if after else None,
                body_hash_before=before.body_hash if before else None,
                body_hash_after=after.body_hash if after else None,
                final_url_before=before.final_url if before else None,
                final_url_after=after.final_url if after else None,
            )
        )
    return out


def _search_urls(e: Entry) -> list[str]:
    return [r.url for r in decode_hit(SearchRecord, _as_hit("search", e)).results]


def _diff_searches(a: View, b: View) -> list[SearchChange]:
    out: list[SearchChange] = []
    for key in sorted(a.keys() | b.keys()):
        provider, query = _parts(_as_hit("search", a[key] if key in a else b[key]))
        before = _search_urls(a[key]) if key in a else None
        after = _search_urls(b[key]) if key in b else None
        if before == after:
            continue
        change: ChangeKind = (
            "added" if before is None else "removed" if after is None else "changed"
        )
        out.append(
            SearchChange(
                provider=provider,
                query=query,
                change=change,
                urls_before=before or [],
                urls_after=after or [],
            )
        )
    return out


def _score_moved(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return x is not y
    return not math.isclose(x, y, rel_tol=0.0, abs_tol=1e-9)


def _diff_verdicts(a: View, b: View) -> list[VerdictChange]:
    out: list[VerdictChange] = []
    for key in sorted(a.keys() | b.keys()):
        before = _baseline(a[key]) if key in a else None
        after = _baseline(b[key]) if key in b else None
        ref = after or before
        assert ref is not None
        if before is None or after is None:
            out.append(
                VerdictChange(
                    case_id=ref.case_id,
                    change="added" if before is None else "removed",
                    passed_before=before.passed if before else None,
                    passed_after=after.passed if after else None,
                )
            )
            continue
        moves = list(_axis_moves(before.axes, after.axes))
        if moves or before.passed != after.passed:
            out.append(
                VerdictChange(
                    case_id=ref.case_id,
                    change="moved",
                    passed_before=before.passed,
                    passed_after=after.passed,
                    axes=moves,
                )
            )
    return out


def _axis_moves(
    before: Mapping[str, AxisSummary], after: Mapping[str, AxisSummary]
) -> Iterable[AxisMove]:
    for name in sorted(before.keys() | after.keys()):
        x, y = before.get(name), after.get(name)
        px, py = (x.passed if x else None), (y.passed if y else None)
        sx, sy = (x.score if x else None), (y.score if y else None)
        if px != py or _score_moved(sx, sy):
            yield AxisMove(
                axis=name, passed_before=px, passed_after=py, score_before=sx, score_after=sy
            )
