"""What a snapshot store holds and reports: its layers and modes, version records, judge
records, case baselines, and the shapes of ``show`` and ``diff``."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from citeguard.models import CitationStatus

Layer = Literal["search", "fetch", "page", "verdict", "case", "judge"]
LAYERS: tuple[Layer, ...] = ("search", "fetch", "page", "verdict", "case", "judge")

# zlib level 6 is zlib's own default: ~4x on HTML at ~50 MB/s. Higher levels gain little on


class SnapshotMode(StrEnum):
    """How a guarded run uses its snapshot store.

    * ``live``: no store; every search and fetch goes to the network.
    * ``record``: go to the network and write everything into the active version.
    * ``replay``: read only; a miss raises :class:`~citeguard.errors.SnapshotMiss` naming the URL
      or query. Nothing touches the network: the real fetcher is never even built.
    * ``refresh``: go to the network and write into a new version (see :func:`prepare_snapshot`).
    """

    LIVE = "live"
    RECORD = "record"
    REPLAY = "replay"
    REFRESH = "refresh"


# --------------------------------------------------------------------------------------------
# Public result models
# --------------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VersionInfo(_Model):
    """One version of a store; the counts are the entries *written* under it, per layer."""

    version: int
    label: str | None = None
    created_at: datetime
    searches: int = 0
    fetches: int = 0
    pages: int = 0
    verdicts: int = 0
    cases: int = 0
    judges: int = 0


class JudgeRecord(_Model):
    """One judge question as recorded: what it finally got and what its requests used.

    ``reply`` is the reply's JSON object the answer came from (for a partial answer, the last
    one); ``error`` / ``message`` / ``retryable`` are the :class:`~citeguard.errors.JudgeError`
    it ended with instead (its ``detail``, its message). ``requests`` counts every attempt,
    retries included; the tokens are the sum of the replies' ``usage``.
    """

    model: str
    reply: dict[str, Any] | None = None
    error: str | None = None
    message: str | None = None
    retryable: bool = False
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class AxisSummary(_Model):
    passed: bool
    score: float | None = None
    evaluated: bool = True


class CaseBaseline(_Model):
    """The verdict vector of one case as recorded (visible) in a version."""

    case_id: str
    version: int  # the version the verdict was written under (≤ the version shown)
    passed: bool
    axes: dict[str, AxisSummary] = Field(default_factory=dict)


class FetchEntry(_Model):
    """One visible fetch entry of a version."""

    method: str
    url: str
    version: int
    status: CitationStatus
    http_status: int | None = None
    body_hash: str | None = None
    final_url: str | None = None


class VersionDetail(_Model):
    """Everything a version replays: its own counts, what it sees (own + inherited), baselines."""

    info: VersionInfo
    visible: dict[str, int] = Field(default_factory=dict)  # layer → entries visible at this version
    fetches: list[FetchEntry] = Field(default_factory=list)
    baselines: list[CaseBaseline] = Field(default_factory=list)


ChangeKind = Literal["added", "removed", "changed"]


class PageChange(_Model):
    """A fetched page whose body hash, status or final URL differs between two versions."""

    method: str
    url: str
    change: ChangeKind
    status_before: CitationStatus | None = None
    status_after: CitationStatus | None = None
    http_status_before: int | None = None
    http_status_after: int | None = None
    body_hash_before: str | None = None
    body_hash_after: str | None = None
    final_url_before: str | None = None
    final_url_after: str | None = None


class SearchChange(_Model):
    """A search whose result URLs differ between two versions."""

    provider: str
    query: str
    change: ChangeKind
    urls_before: list[str] = Field(default_factory=list)
    urls_after: list[str] = Field(default_factory=list)


class AxisMove(_Model):
    axis: str
    passed_before: bool | None = None
    passed_after: bool | None = None
    score_before: float | None = None
    score_after: float | None = None


class VerdictChange(_Model):
    """A case whose baseline verdict moved: overall pass/fail, or any axis's pass or score."""

    case_id: str
    change: Literal["added", "removed", "moved"]
    passed_before: bool | None = None
    passed_after: bool | None = None
    axes: list[AxisMove] = Field(default_factory=list)


class SnapshotDiff(_Model):
    """What changed between the views of versions ``v1`` and ``v2``."""

    v1: int
    v2: int
    pages: list[PageChange] = Field(default_factory=list)
    searches: list[SearchChange] = Field(default_factory=list)
    verdicts: list[VerdictChange] = Field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.pages or self.searches or self.verdicts)
