"""citeguard: refuse to let a search agent's bad citations through.

The public API, re-exported; the modules behind it are the pipeline (parse → fetch → extract →
check → verdict → regenerate). Optional extras (the local embedding model, OpenTelemetry, Redis)
are imported only when used.
"""

from citeguard.checks.diversity import QuestionClass, SourceKind, classify_question, classify_source
from citeguard.checks.entail import (
    Entailer,
    JudgeEntailer,
    LocalEntailer,
    NLIEntailer,
    WordOverlapEntailer,
    make_entailer,
)
from citeguard.checks.freshness import FreshnessClass, Regime, classify_freshness
from citeguard.checks.passage import find_paraphrase, find_passage, prepare_text, text_fragment_url
from citeguard.checks.query import QueryScore, score_query
from citeguard.errors import (
    CitationRejected,
    CiteguardError,
    EntailerError,
    MissingExtraError,
    PolicyError,
    SnapshotCorrupt,
    SnapshotError,
    SnapshotMiss,
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
)
from citeguard.parse import parse_answer
from citeguard.policy import (
    DiversityPolicy,
    EntailmentPolicy,
    FetchPolicy,
    FreshnessPolicy,
    PassagePolicy,
    Policy,
    QueryPolicy,
)
from citeguard.snapshot import SnapshotMode, SnapshotStore, SQLiteSnapshotStore
from citeguard.web.fetch import Fetcher, Resolver, StaticResolver
from citeguard.web.page import extract_page
from citeguard.web.urls import UrlProblem, normalize_url, registrable_domain

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
    "Feedback",
    "FetchPolicy",
    "FetchResult",
    "Fetcher",
    "Finding",
    "FreshnessClass",
    "FreshnessPolicy",
    "Guard",
    "GuardResult",
    "JudgeEntailer",
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
    "Verdict",
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
    "prepare_text",
    "registrable_domain",
    "score_query",
    "text_fragment_url",
]
