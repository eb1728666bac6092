"""The data that crosses citeguard's public boundary.

Every stage of the pipeline (parse → fetch → extract → check → verdict → regenerate) takes and
returns these pydantic v2 models, so a verdict serialises to JSON byte for byte the same on replay.

Expected web outcomes are values, never exceptions: every citation ends with a
:class:`CitationStatus` and a human-readable ``reason``.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator

# Sets serialise sorted: a replayed verdict must be byte-identical, whatever the hash seed.
UrlSet = Annotated[
    frozenset[str], PlainSerializer(lambda s: sorted(s), return_type=list[str], when_used="always")
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------------


class Outcome(StrEnum):
    """The three-way outcome of resolving a citation."""

    RESOLVES = "resolves"
    BROKEN = "broken"
    UNVERIFIABLE = "unverifiable"


class CitationStatus(StrEnum):
    """One value per outcome a user must tell apart. Values are stable, lowercase, JSON-safe."""

    OK = "ok"
    # broken: the link itself is bad
    NOT_FOUND = "not_found"  # 404
    SOFT_404 = "soft_404"  # a 200 page that says it is not found
    GONE = "gone"  # 410
    HTTP_ERROR = "http_error"  # any other 4xx/5xx after retries
    UNREACHABLE = "unreachable"  # NXDOMAIN, connection refused
    CROSS_DOMAIN_REDIRECT = "cross_domain_redirect"
    REDIRECT_LOOP = "redirect_loop"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    BLOCKED_SCHEME = "blocked_scheme"
    MALFORMED_URL = "malformed_url"
    BLOCKED_ADDRESS = "blocked_address"
    # unverifiable: we could not tell
    TIMEOUT = "timeout"
    BOT_WALL = "bot_wall"  # 403 + cf-mitigated, 999, captcha pages
    RATE_LIMITED = "rate_limited"  # 429 after retries
    TLS_ERROR = "tls_error"
    CONNECTION_ERROR = "connection_error"  # reset mid-body and similar after retries
    TOO_LARGE = "too_large"
    UNSUPPORTED_TYPE = "unsupported_type"
    # a provider cites a document it names no URL for (an Anthropic document citation)
    NOT_CHECKABLE = "not_checkable"
    # content checks: the link resolves but does not back the claim
    PASSAGE_MISSING = "passage_missing"
    PASSAGE_ALTERED = "passage_altered"
    # the quote is on the page, but the page negates or hedges it right before the quoted words
    QUOTE_OUT_OF_CONTEXT = "quote_out_of_context"
    NOT_ENTAILED = "not_entailed"
    # a scholarly reference whose title, authors, year or venue are not those of the paper it
    # points at (or the one a metadata service finds for it)
    METADATA_MISMATCH = "metadata_mismatch"
    # policy
    # the caller excluded the URL (``exclude_urls`` it passed; never a failure of an earlier
    # attempt of the same run: that URL keeps its failure's status, ``CitationReport.excluded``)
    EXCLUDED_BY_POLICY = "excluded_by_policy"
    NOT_RETRIEVED = "not_retrieved"  # cited but no recorded search returned it

    @property
    def outcome(self) -> Outcome:
        """Resolution outcome: does the URL itself resolve?"""
        return _OUTCOME[self]

    @property
    def stage(self) -> CitationStage | None:
        """The pipeline stage at which a citation with this status failed (None: it passed)."""
        return _STAGE[self]

    def is_ok(self) -> bool:
        return self is CitationStatus.OK


_OUTCOME: dict[CitationStatus, Outcome] = {
    CitationStatus.OK: Outcome.RESOLVES,
    CitationStatus.NOT_FOUND: Outcome.BROKEN,
    CitationStatus.SOFT_404: Outcome.BROKEN,
    CitationStatus.GONE: Outcome.BROKEN,
    CitationStatus.HTTP_ERROR: Outcome.BROKEN,
    CitationStatus.UNREACHABLE: Outcome.BROKEN,
    CitationStatus.CROSS_DOMAIN_REDIRECT: Outcome.BROKEN,
    CitationStatus.REDIRECT_LOOP: Outcome.BROKEN,
    CitationStatus.TOO_MANY_REDIRECTS: Outcome.BROKEN,
    CitationStatus.BLOCKED_SCHEME: Outcome.BROKEN,
    CitationStatus.MALFORMED_URL: Outcome.BROKEN,
    CitationStatus.BLOCKED_ADDRESS: Outcome.BROKEN,
    CitationStatus.TIMEOUT: Outcome.UNVERIFIABLE,
    CitationStatus.BOT_WALL: Outcome.UNVERIFIABLE,
    CitationStatus.RATE_LIMITED: Outcome.UNVERIFIABLE,
    CitationStatus.TLS_ERROR: Outcome.UNVERIFIABLE,
    CitationStatus.CONNECTION_ERROR: Outcome.UNVERIFIABLE,
    CitationStatus.TOO_LARGE: Outcome.UNVERIFIABLE,
    CitationStatus.UNSUPPORTED_TYPE: Outcome.UNVERIFIABLE,
    CitationStatus.NOT_CHECKABLE: Outcome.UNVERIFIABLE,
    CitationStatus.PASSAGE_MISSING: Outcome.RESOLVES,
    CitationStatus.PASSAGE_ALTERED: Outcome.RESOLVES,
    CitationStatus.QUOTE_OUT_OF_CONTEXT: Outcome.RESOLVES,
    CitationStatus.NOT_ENTAILED: Outcome.RESOLVES,
    CitationStatus.METADATA_MISMATCH: Outcome.RESOLVES,
    CitationStatus.EXCLUDED_BY_POLICY: Outcome.BROKEN,
    CitationStatus.NOT_RETRIEVED: Outcome.RESOLVES,
}

# The stages a cited URL goes through, in order; a failing status names the one it failed at.
CitationStage = Literal["parse", "policy", "fetch", "extract", "metadata", "passage", "entailment"]

_STAGE: dict[CitationStatus, CitationStage | None] = {
    CitationStatus.OK: None,
    CitationStatus.MALFORMED_URL: "parse",
    CitationStatus.BLOCKED_SCHEME: "parse",
    CitationStatus.EXCLUDED_BY_POLICY: "policy",
    CitationStatus.NOT_RETRIEVED: "policy",
    CitationStatus.NOT_FOUND: "fetch",
    CitationStatus.SOFT_404: "extract",
    CitationStatus.GONE: "fetch",
    CitationStatus.HTTP_ERROR: "fetch",
    CitationStatus.UNREACHABLE: "fetch",
    CitationStatus.CROSS_DOMAIN_REDIRECT: "fetch",
    CitationStatus.REDIRECT_LOOP: "fetch",
    CitationStatus.TOO_MANY_REDIRECTS: "fetch",
    CitationStatus.BLOCKED_ADDRESS: "fetch",
    CitationStatus.TIMEOUT: "fetch",
    CitationStatus.BOT_WALL: "fetch",
    CitationStatus.RATE_LIMITED: "fetch",
    CitationStatus.TLS_ERROR: "fetch",
    CitationStatus.CONNECTION_ERROR: "fetch",
    CitationStatus.TOO_LARGE: "fetch",
    CitationStatus.UNSUPPORTED_TYPE: "extract",
    CitationStatus.NOT_CHECKABLE: "parse",
    CitationStatus.PASSAGE_MISSING: "passage",
    CitationStatus.PASSAGE_ALTERED: "passage",
    CitationStatus.QUOTE_OUT_OF_CONTEXT: "passage",
    CitationStatus.NOT_ENTAILED: "entailment",
    CitationStatus.METADATA_MISMATCH: "metadata",
}


class Regime(StrEnum):
    """How fast the answer to a question changes."""

    INSENSITIVE = "insensitive"  # never or almost never changes
    SLOW = "slow"  # changes over years
    FAST = "fast"  # changes within a year or less
    REAL_TIME = "real_time"  # changes within days or hours


_REGIME_ORDER = (Regime.INSENSITIVE, Regime.SLOW, Regime.FAST, Regime.REAL_TIME)


class FreshnessClass(_Model):
    """The regime of a question, the cues that decided it, and how sure that is.

    ``regime`` is the best guess. ``plausible`` lists every regime the question may truly be
    (the guess and the slower ones the development data could not rule out, fastest first);
    empty or one entry: the regime is confident. ``confidence`` is the estimated share of such
    questions whose true regime is at least as fast as ``regime`` (None: not estimated, e.g. a
    judge's regime). The freshness gate applies :attr:`gate_regime`'s floor.
    """

    regime: Regime
    cues: list[str] = Field(default_factory=list)
    plausible: list[Regime] = Field(default_factory=list)
    confidence: float | None = None

    @property
    def confident(self) -> bool:
        """Whether one regime is plausible (the gate may reject on its floor)."""
        return len(set(self.plausible) | {self.regime}) == 1

    @property
    def gate_regime(self) -> Regime:
        """The slowest plausible regime: the one whose (most lenient) floor the gate applies."""
        return min({*self.plausible, self.regime}, key=_REGIME_ORDER.index)


class Severity(StrEnum):
    ERROR = "error"  # fails its axis
    WARNING = "warning"  # reported, does not fail by itself
    INFO = "info"


class Finding(_Model):
    """One observation with a stable machine code and a message a person (or an LLM) can act on."""

    code: str
    message: str
    severity: Severity = Severity.ERROR
    axis: str | None = None
    url: str | None = None
    claim_index: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Parsed answer
# --------------------------------------------------------------------------------------------

CitationKind = Literal[
    "inline_link",
    "reference_link",
    "numbered",
    "footnote",
    "bare_url",
    "html_anchor",
    "structured",
    # a provider's citation object: a marker range it gave (OpenAI url_citation) that is no link
    # of the text, or the end of the text it supports (Anthropic, Gemini; a zero-width marker)
    "annotation",
    # a source passed beside a text that cites it with no marker (``references=``)
    "external",
]

# Where a citation came from: the text itself (markdown, HTML, bare URLs), structured items,
# ``references=`` passed beside the text, or a provider's citation objects.
CitationOrigin = Literal[
    "markdown", "structured", "references", "openai", "anthropic", "gemini", "perplexity"
]


class Citation(_Model):
    """One occurrence of a cited URL in the answer text."""

    index: int
    url: str  # as written (after reference resolution)
    normalized_url: str | None  # None when the URL is malformed or its scheme is blocked
    kind: CitationKind
    marker: str  # the literal text of the marker / link in the answer
    label: str | None = None  # reference id / footnote id / link text
    start: int  # character offsets of the marker in Answer.text (-1 for structured input)
    end: int
    claim_index: int | None = None
    quote: str | None = None
    origin: CitationOrigin | None = None
    title: str | None = None  # the source's title, as the provider gave it
    confidence: float | None = None  # the provider's confidence in the support (Gemini)
    # the URL is a provider redirect (Gemini's grounding-api-redirect), resolved by the Guard
    provider_redirect: bool = False
    via: str | None = None  # the provider redirect URL this citation's URL was resolved from
    # the reference-list entry this citation resolved to, as written (capped), when it reads as
    # a paper: its title, authors, year and venue are compared with the paper's
    reference: str | None = None


class Claim(_Model):
    """A sentence or bullet item of the answer, with the citations that support it."""

    index: int
    text: str
    start: int
    end: int
    citation_indices: list[int] = Field(default_factory=list)
    quotes: list[str] = Field(default_factory=list)


class Answer(_Model):
    text: str
    claims: list[Claim] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    references: dict[str, str] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    # the searches a provider response reports with its answer (Perplexity's search_results,
    # Anthropic's web_search_tool_result blocks, ...): the Guard adds them to the run's
    searches: list[SearchRecord] = Field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        """Distinct normalised URLs in order of first citation."""
        seen: dict[str, None] = {}
        for c in self.citations:
            if c.normalized_url is not None:
                seen.setdefault(c.normalized_url, None)
        return list(seen)


# --------------------------------------------------------------------------------------------
# Searches the agent made
# --------------------------------------------------------------------------------------------


class SearchResult(_Model):
    url: str
    title: str | None = None
    snippet: str | None = None
    published: datetime | None = None
    rank: int = 0
    # the source table's verdict on the URL, filled when the tool's rows are read (search.py)
    primary: bool | None = None
    source_kind: str | None = None


class SearchRecord(_Model):
    """One literal search call of the agent and what it got back."""

    query: str
    provider: str = "default"
    results: list[SearchResult] = Field(default_factory=list)
    raw: Any = Field(default=None, repr=False)  # what the search function returned, JSON-safe
    elapsed_ms: float = 0.0


# --------------------------------------------------------------------------------------------
# Fetch and page
# --------------------------------------------------------------------------------------------


class FetchResult(_Model):
    """What the fetcher learned about one URL. ``body`` is excluded from JSON."""

    url: str
    final_url: str | None = None
    status: CitationStatus
    reason: str
    http_status: int | None = None
    method: Literal["HEAD", "GET", "NONE"] = "NONE"
    redirects: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)
    content_type: str | None = None
    body: bytes | None = Field(default=None, exclude=True, repr=False)
    truncated: bool = False
    attempts: int = 1
    elapsed_ms: float = 0.0
    from_cache: bool = False
    fetched_at: datetime | None = None
    # the identifier resolver (doi.org, hdl.handle.net, …) whose redirect led to another site:
    # the page there is the one checked (FetchPolicy.resolver_hosts)
    via_resolver: str | None = None


PageKind = Literal["html", "pdf", "text", "unsupported", "empty"]


class Page(_Model):
    """Body → visible text, main text, title, canonical URL, language and dates."""

    url: str
    kind: PageKind
    text: str = ""  # all visible text
    main_text: str | None = None  # the article body, when it can be told apart from boilerplate
    title: str | None = None
    canonical_url: str | None = None
    language: str | None = None
    published: datetime | None = None
    modified: datetime | None = None
    date_source: str | None = None  # e.g. "json-ld", "meta:article:published_time", "htmldate"
    types: list[str] = Field(default_factory=list)  # JSON-LD @type values (page signals)
    charset: str | None = None
    # why a page has no text although its fetch succeeded (e.g. extraction ran out of time)
    problem: str | None = None


class PassageMatch(_Model):
    found: bool
    score: float  # 0..100
    start: int = -1
    end: int = -1
    matched_text: str = ""
    how: Literal["exact", "normalised", "fuzzy", "near_copy", "paraphrase", "none"] = "none"
    altered: bool = False
    differing_tokens: list[str] = Field(default_factory=list)
    in_main_text: bool | None = None
    reason: str = ""


# Claim support, three-way plus a conflict: ``supported`` (P(supported) at or above the
# backend's accept threshold), ``uncertain`` (between its two thresholds, or a judge that could
# not tell or was not asked), ``not_supported`` (below its reject threshold), ``contradicted``
# (a clear conflict). Only ``not_supported`` and ``contradicted`` are hard rejects.
EntailmentLabel = Literal["supported", "uncertain", "not_supported", "contradicted"]
# the names earlier versions wrote ("unsupported" meant what is now not_supported or uncertain;
# a recorded verdict read back keeps its hard reject)
_LEGACY_LABELS = {"unsupported": "not_supported"}


class EntailmentScore(_Model):
    label: EntailmentLabel
    score: float  # P(supported), calibrated on development data unless the backend says not
    probabilities: dict[str, float] = Field(default_factory=dict)
    evidence: str = ""
    backend: str
    reason: str = ""
    # the (reject below, accept from) P(supported) thresholds the label was read with; None when
    # the label did not come from thresholds (a judge's verdict, a quote on the page)
    thresholds: tuple[float, float] | None = None

    @field_validator("label", mode="before")
    @classmethod
    def _legacy_label(cls, v: object) -> object:
        return _LEGACY_LABELS.get(v, v) if isinstance(v, str) else v


# --------------------------------------------------------------------------------------------
# Verdict
# --------------------------------------------------------------------------------------------

# Why a citation fails: "url", the URL itself (dead, soft 404, blocked, bot wall, unreachable,
# a cross-site redirect, not retrieved, …): every claim citing it fails and it is excluded;
# "pair", one (claim, URL) pair (the page resolves but does not back that claim): the claim goes
# to repair and to the feedback, and the URL is excluded only when no claim it backs passes.
FailureKind = Literal["url", "pair"]


class MetadataMismatch(_Model):
    """One field of a scholarly reference that is not the paper's."""

    field: Literal["title", "authors", "year", "venue"]
    cited: str  # what the reference says
    found: str  # what the paper's metadata says
    source: str  # where the true value came from ("citation_* tags of …", "Crossref", …)


class ScholarlyReport(_Model):
    """What the scholarly check found for a reference: the paper's identifiers, where its
    metadata came from, the resolver it was reached through, and each field that differs."""

    doi: str | None = None
    arxiv_id: str | None = None
    title: str | None = None  # the paper's title, as its metadata gives it
    source: str | None = None
    via_resolver: str | None = None
    mismatches: list[MetadataMismatch] = Field(default_factory=list)


class CitationReport(_Model):
    """The end state of one distinct cited URL."""

    url: str
    normalized_url: str | None
    final_url: str | None = None
    domain: str | None = None
    status: CitationStatus
    reason: str
    http_status: int | None = None
    redirects: list[str] = Field(default_factory=list)
    claim_indices: list[int] = Field(default_factory=list)
    # False: no claim cites the URL, though the user sees it (a reference-list entry no marker
    # cites, a link of a "Sources:" block); checked all the same
    cited_by_claim: bool = True
    passage: PassageMatch | None = None
    entailment: EntailmentScore | None = None
    # how well the page supports the claims citing it: the failing claim's label, else
    # "uncertain" when a claim passed unsettled (validity.support_uncertain), else "supported";
    # None when no claim's support was judged
    support: EntailmentLabel | None = None
    published: datetime | None = None
    modified: datetime | None = None
    # the page-extraction rule that gave ``published`` (Page.date_source: "json-ld", "meta:…",
    # "time", "url", "htmldate", …); freshness treats a text heuristic's date as weak
    date_source: str | None = None
    text_fragment_url: str | None = None
    title: str | None = None
    primary: bool | None = None
    source_kind: str | None = None  # the source table's category (checks/sources.py)
    elapsed_ms: float = 0.0
    # why it fails (None: it does not): "url", or "pair" (status and reason are the failing
    # pair's; the URL is an offending URL only when no claim it backs passes): FailureKind
    failure: FailureKind | None = None
    # this attempt excluded the URL and did not fetch it again: the status and reason are those
    # of its failure in an earlier attempt of the run (or excluded_by_policy: the caller's)
    excluded: bool = False
    # an identifier resolver (doi.org, …) led to the page checked (FetchResult.via_resolver)
    via_resolver: str | None = None
    # a scholarly reference: the paper found, its metadata's source, each field that differs
    scholarly: ScholarlyReport | None = None

    @property
    def outcome(self) -> Outcome:
        return self.status.outcome


class ClaimCheck(_Model):
    """One (claim, cited URL) pair: is the passage on the page and does it entail the claim?"""

    claim_index: int
    url: str
    status: CitationStatus
    reason: str
    quote: str | None = None
    passage: PassageMatch | None = None
    entailment: EntailmentScore | None = None
    text_fragment_url: str | None = None  # the cited page opened at the evidence
    gated: bool = False  # this pair made the validity axis hard-reject the URL
    # why the pair fails the answer (None: it does not): "url", the URL itself failed; "pair",
    # the page resolves but does not back this claim (FailureKind)
    failure: FailureKind | None = None


class ClaimReport(_Model):
    """Per-claim support: the view users actually see.

    ``label``, ``probability``, ``backend``, ``evidence`` and ``text_fragment_url`` come from
    the claim's best citation (one that passed, else the highest support score): the support
    label and P(supported) its backend gave, and the evidence window it judged, with a link that
    opens the page at it. ``gated``: one of the claim's citations was hard-rejected for it.
    """

    index: int
    text: str
    checks: list[ClaimCheck] = Field(default_factory=list)
    supported: bool | None = None  # None: the claim cites nothing
    support: float | None = None  # best entailment score among its citations
    urls: list[str] = Field(default_factory=list)  # its citations, as cited
    label: EntailmentLabel | None = None  # None: no backend judged it (e.g. a verified quote)
    probability: float | None = None
    backend: str | None = None
    evidence: str | None = None
    text_fragment_url: str | None = None
    gated: bool = False


# An axis is named by its check (citeguard.checks.registry lists them, in verdict order).
AxisName = str
AXES: tuple[AxisName, ...] = ("validity", "diversity", "freshness", "query")


class AxisResult(_Model):
    """One axis of the verdict vector. ``evaluated`` is False when the axis had nothing to judge."""

    name: AxisName
    passed: bool
    score: float | None = None
    evaluated: bool = True
    gating: bool = True
    findings: list[Finding] = Field(default_factory=list)
    offending_urls: list[str] = Field(default_factory=list)  # regenerate without these
    details: dict[str, Any] = Field(default_factory=dict)


class JudgeUsage(_Model):
    """What the LLM judges of one guarded run used (every chat-completions request, retries
    included): tokens as the replies' ``usage`` reported them, and their cost at the
    ``JudgePolicy`` prices. ``skipped``: requests not sent because ``Policy.cost_budget`` was
    spent."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    skipped: int = 0


#: The one vocabulary for what became of an answer, the same in every path: ``citeguard
#: serve`` (the ``x-citeguard-verdict`` header and the ``citeguard.verdict`` body field, streamed
#: or not), ``/v1/check``, the gateways (``citeguard.verdict``), the CLI and
#: :attr:`GuardResult.verdict_word` / :attr:`Verdict.verdict_word`. ``passed``: the answer the
#: user gets passed as the model wrote it (after however many attempts: ``attempts`` says how
#: many); ``repaired``: citeguard changed it (citations re-pointed, quotes corrected, failing
#: claims removed) and the result passes; ``rejected``: it failed.
VerdictWord = Literal["passed", "repaired", "rejected"]
VERDICT_WORDS: tuple[VerdictWord, ...] = ("passed", "repaired", "rejected")


class Verdict(_Model):
    """Four axes, each reported on its own — never one blended score."""

    passed: bool
    axes: dict[str, AxisResult]
    citations: list[CitationReport] = Field(default_factory=list)
    claims: list[ClaimReport] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)  # answer-level (parse) findings
    offending_urls: UrlSet = frozenset()
    regime: str | None = None  # the question's freshness regime, as the freshness check saw it
    elapsed_ms: float = 0.0
    judge_usage: JudgeUsage | None = None  # the run's judge requests so far; None: no judge asked

    @property
    def verdict_word(self) -> VerdictWord:
        """``passed`` or ``rejected`` (a check changes nothing): see :data:`VerdictWord`."""
        return "passed" if self.passed else "rejected"


class Repair(_Model):
    """One change the guard made to a failing answer instead of calling the answer function
    again (:mod:`citeguard.repair`): a citation re-pointed at a page that supports its claim
    (``swap``), a quote set to the cited page's own words (``correct_quote``), or a claim no
    page supports removed (``drop``). ``claim_index`` and ``claim`` are those of the answer
    repaired (attempt ``attempt``); ``None`` for a reference entry no claim cites."""

    kind: Literal["swap", "correct_quote", "drop"]
    attempt: int
    claim_index: int | None = None
    claim: str = ""
    before: str  # swap: the failing URL; correct_quote: the quote; drop: what was removed
    after: str = ""  # swap: the URL now cited; correct_quote: the page's words; drop: ""
    status: CitationStatus | None = None  # what failed
    evidence_url: str | None = None
    passage: str | None = None  # the passage of evidence_url that supports the claim
    reason: str = ""


class Attempt(_Model):
    """One synthesis call and the verdict on its answer."""

    number: int  # 1-based
    answer: str
    verdict: Verdict
    excluded_urls: UrlSet = frozenset()
    feedback: str | None = None
    searches: list[SearchRecord] = Field(default_factory=list)  # made during this attempt
    elapsed_ms: float = 0.0
    cost: float | None = None
    error: str | None = None  # the answer function raised
    # a structured answer ({claim, url, quote} items) as the answer function returned it;
    # ``answer`` is then its claims' text
    structured: list[dict[str, Any]] | None = None
    # a repaired answer (no synthesis call; ``number`` is the attempt it repaired): each change
    repairs: list[Repair] = Field(default_factory=list)


class SnapshotRef(_Model):
    """Where a logged run's searches and pages were recorded, for ``citeguard rescore`` to
    replay them: a snapshot store (an SQLite file path, or a ``redis://`` URL with its password
    left out, and its namespace) and the version the run used."""

    store: str
    namespace: str | None = None  # Redis stores only
    version: int | None = None  # None: the store's newest


class GuardResult(_Model):
    """A guarded run: the answer the user gets and every attempt that led to it."""

    answer: str
    passed: bool
    verdict: Verdict
    attempts: list[Attempt]
    outcome: Literal["passed", "failed", "stripped", "reported", "repaired"] = "passed"
    message: str = ""
    # the answer's {claim, url, quote} items when the answer function returned structure
    structured: list[dict[str, Any]] | None = None
    # what on_fail="strip" removed: the claims' text, and the citations' URLs
    removed_claims: list[str] = Field(default_factory=list)
    removed_urls: list[str] = Field(default_factory=list)
    # the repairs made to the answer returned (citeguard.repair)
    repairs: list[Repair] = Field(default_factory=list)

    @property
    def verdict_word(self) -> VerdictWord:
        """What became of the answer, in the one vocabulary (:data:`VerdictWord`): a run that
        regenerated and then passed is ``passed``; one whose answer citeguard mended or
        stripped into a pass is ``repaired``."""
        if not self.passed:
            return "rejected"
        return "repaired" if self.outcome in ("repaired", "stripped") else "passed"

    def to_case(
        self,
        prompt: str = "",
        *,
        timestamp: datetime | None = None,
        snapshot: SnapshotRef | None = None,
    ) -> dict[str, Any]:
        """This run as one line of the ``citeguard report`` log (README, "The traffic report and
        its input"): a JSON-able dict; ``json.dumps`` it and append it to a ``.jsonl`` file
        (``Guard(log_to=path)`` does). ``prompt``: the user's question (a result does not hold
        it); ``timestamp``: when (default: now); ``snapshot``: the store the run recorded into.
        It holds what ``citeguard rescore`` needs to run the gate again: the run's searches
        (queries and results; the tools' raw JSON left out), the URLs the checked attempt
        excluded, the structured items when the answer was structured."""
        when = timestamp if timestamp is not None else datetime.now().astimezone()
        searches = [s for a in self.attempts for s in a.searches]
        # the attempt whose verdict this is; a stripped answer was re-checked excluding nothing
        checked = next((a for a in self.attempts if a.verdict is self.verdict), None)
        excluded = checked.excluded_urls if checked and self.outcome != "stripped" else frozenset()
        return {
            "timestamp": when.isoformat(),
            "prompt": prompt,
            "queries": [s.query for s in searches if s.query.strip()],
            "answer": self.answer,
            "outcome": self.outcome,
            "attempts": len(self.attempts),
            "verdict": self.verdict.model_dump(mode="json"),
            "searches": [s.model_dump(mode="json", exclude={"raw"}) for s in searches],
            "excluded_urls": sorted(excluded),
            "structured": self.structured,
            "snapshot": snapshot.model_dump(mode="json") if snapshot is not None else None,
        }


class Synthesis(BaseModel):
    """What an answer function may return instead of a plain string, to report its cost."""

    model_config = ConfigDict(frozen=True)

    text: str
    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
