"""The public API is exactly ``citeguard.__all__``, pinned here: a change to it is a decision.

Adding a name is a new promise to users; removing one breaks them. Update this list only on
purpose (and say so in the changelog).
"""

from __future__ import annotations

import citeguard

PUBLIC = [
    "Answer",
    "Attempt",
    "AxisResult",
    "Citation",
    "CitationRejected",
    "CitationReport",
    "CitationStatus",
    "CiteguardError",
    "Claim",
    "ClaimCheck",
    "ClaimReport",
    "DiversityPolicy",
    "Entailer",
    "EntailerError",
    "EntailmentPolicy",
    "EntailmentScore",
    "EventLoopError",
    "Feedback",
    "FetchPolicy",
    "FetchResult",
    "Finding",
    "FreshnessClass",
    "FreshnessPolicy",
    "Guard",
    "GuardResult",
    "InputError",
    "JudgeEntailer",
    "JudgeError",
    "JudgePolicy",
    "LocalEntailer",
    "MissingExtraError",
    "NLIEntailer",
    "Outcome",
    "Page",
    "PassageMatch",
    "PassagePolicy",
    "Policy",
    "PolicyError",
    "QueryPolicy",
    "QueryScore",
    "QuestionClass",
    "Regime",
    "Resolver",
    "SQLiteSnapshotStore",
    "ScholarlyPolicy",
    "SearchRecord",
    "SearchResult",
    "Severity",
    "SnapshotCorrupt",
    "SnapshotError",
    "SnapshotMiss",
    "SnapshotMode",
    "SnapshotStore",
    "SourceKind",
    "StaticResolver",
    "Synthesis",
    "UrlProblem",
    "UsageError",
    "Verdict",
    "VerdictWord",
    "WordOverlapEntailer",
    "__version__",
    "classify_freshness",
    "classify_question",
    "classify_source",
    "extract_page",
    "find_paraphrase",
    "find_passage",
    "make_entailer",
    "normalize_url",
    "parse_answer",
    "registrable_domain",
    "score_query",
    "text_fragment_url",
]


def test_all_is_pinned_and_sorted() -> None:
    assert citeguard.__all__ == PUBLIC
    assert sorted(PUBLIC) == PUBLIC


def test_every_public_name_resolves_and_star_import_gives_exactly_all() -> None:
    assert all(hasattr(citeguard, name) for name in PUBLIC)
    namespace: dict[str, object] = {}
    exec("from citeguard import *", namespace)  # the user's view of the package
    assert sorted(k for k in namespace if k != "__builtins__") == PUBLIC


def test_internals_are_not_top_level_but_stay_in_their_modules() -> None:
    for name in ("Fetcher", "prepare_text"):
        assert name not in citeguard.__all__
        assert not hasattr(citeguard, name)
    from citeguard.checks.passage import prepare_text
    from citeguard.web.fetch import Fetcher

    assert callable(prepare_text) and isinstance(Fetcher, type)


def test_models_behind_public_fields_are_public() -> None:
    from citeguard.models import CitationStatus, FetchResult, Outcome, Synthesis

    assert citeguard.FetchResult is FetchResult and citeguard.Outcome is Outcome
    assert citeguard.Synthesis is Synthesis
    assert isinstance(CitationStatus.NOT_FOUND.outcome, citeguard.Outcome)
