"""citeguard: refuse to let a search agent's bad citations through.

The public API, re-exported; the modules behind it are the pipeline (parse → fetch → extract →
check → verdict → regenerate). Optional extras (the local embedding model, OpenTelemetry, Redis)
are imported only when used.

``__all__`` is the whole public surface (pinned by ``tests/test_public_api.py``). ``FetchResult``
and ``Outcome`` are public because public APIs hand them out (``SnapshotStore.get_fetch`` returns
a ``FetchResult``; ``CitationStatus.outcome`` and ``CitationReport.outcome`` are an ``Outcome``).
``RedisSnapshotStore`` is importable from here too (``from citeguard import RedisSnapshotStore``)
but imported only when asked for, and kept out of ``__all__``: without the ``redis`` extra,
``import citeguard`` and ``from citeguard import *`` still work, and asking for it raises
:class:`MissingExtraError` with the install line. Internals such as
``citeguard.web.fetch.Fetcher`` and ``citeguard.checks.passage.prepare_text`` stay importable
from their modules but are not part of this surface.
"""

from typing import TYPE_CHECKING, Any

from citeguard.checks.diversity import QuestionClass, classify_question
from citeguard.checks.entail import (
    Entailer,
    JudgeEntailer,
    LocalEntailer,
    NLIEntailer,
    WordOverlapEntailer,
    make_entailer,
)
from citeguard.checks.freshness import FreshnessClass, Regime, classify_freshness
from citeguard.checks.passage import find_paraphrase, find_passage, text_fragment_url
from citeguard.checks.query import QueryScore, score_query
from citeguard.checks.sources import SourceKind, classify_source
from citeguard.errors import (
    CitationRejected,
    CiteguardError,
    EntailerError,
    EventLoopError,
    InputError,
    JudgeError,
    MissingExtraError,
    PolicyError,
    SnapshotCorrupt,
    SnapshotError,
    SnapshotMiss,
    UsageError,
)
from citeguard.feedback import Feedback
from citeguard.guard import Guard
from citeguard.models import (
    Answer,
    Attempt,
    AxisResult,
    Citation,
    CitationReport,
    CitationStatus,
    Claim,
    ClaimCheck,
    ClaimReport,
    EntailmentScore,
    FetchResult,
    Finding,
    GuardResult,
    Outcome,
    Page,
    PassageMatch,
    SearchRecord,
    SearchResult,
    Severity,
    Synthesis,
    Verdict,
    VerdictWord,
)
from citeguard.parse import parse_answer
from citeguard.policy import (
    DiversityPolicy,
    EntailmentPolicy,
    FetchPolicy,
    FreshnessPolicy,
    JudgePolicy,
    PassagePolicy,
    Policy,
    QueryPolicy,
    ScholarlyPolicy,
)
from citeguard.snapshot import SnapshotMode, SnapshotStore, SQLiteSnapshotStore
from citeguard.web.fetch import Resolver, StaticResolver
from citeguard.web.page import extract_page
from citeguard.web.urls import UrlProblem, normalize_url, registrable_domain

if TYPE_CHECKING:
    from citeguard.snapshot.redis_store import RedisSnapshotStore as RedisSnapshotStore

__version__ = "0.1.0"

__all__ = [
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


def __getattr__(name: str) -> Any:
    # optional extras, imported on first use so the base install imports citeguard
    if name == "RedisSnapshotStore":
        from citeguard import snapshot

        return snapshot.RedisSnapshotStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
