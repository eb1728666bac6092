"""Policy: every threshold and switch citeguard uses, with documented defaults.

A ``Policy`` and its sections are frozen pydantic models that validate on construction: a bad
value or an unknown key raises :class:`~citeguard.errors.PolicyError` (a ``ValueError``), never
pydantic's ``ValidationError``. Make variants with :meth:`Policy.replace`, which validates too;
a section given as a dict is merged into the current one::

    strict = Policy().replace(fetch={"url_timeout": 5.0}, unverifiable_fails=True)

(``model_copy(update=...)`` skips validation; prefer ``replace``.) The LLM judge's endpoint
lives in one section, :class:`JudgePolicy` (``Policy.judge``), shared by the entailment,
freshness and query axes; each axis only switches it on (``entailment.backend="judge"``,
``freshness.use_judge``, ``query.use_judge``).

Defaults are module-level ``DEFAULT_*`` constants so they can be quoted in docs and tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from citeguard.errors import PolicyError

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_URL_TIMEOUT = 10.0
DEFAULT_ANSWER_DEADLINE = 20.0
DEFAULT_MAX_REDIRECTS = 10
DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024
DEFAULT_MAX_DECOMPRESSED_BYTES = 20 * 1024 * 1024
DEFAULT_GLOBAL_CONCURRENCY = 256
DEFAULT_PER_HOST_CONCURRENCY = 16
DEFAULT_RETRIES = 2
DEFAULT_RETRY_BACKOFF = 0.25
DEFAULT_RETRY_AFTER_CAP = 5.0
DEFAULT_POSITIVE_TTL = 6 * 3600.0
DEFAULT_NEGATIVE_TTL = 5 * 60.0
DEFAULT_USER_AGENT = "citeguard/0.1 (+https://pypi.org/project/citeguard-agent/)"
# identifier resolvers whose redirects may leave their site (FetchPolicy.resolver_hosts): the
# DOI resolver and its old names, the Handle System, identifiers.org and its twin n2t.net,
# Elsevier's DOI link resolver (doi.org → linkinghub.elsevier.com → sciencedirect.com), and NCBI's
# PubMed / PMC id links
DEFAULT_RESOLVER_HOSTS = frozenset(
    {
        "doi.org",
        "dx.doi.org",
        "www.doi.org",
        "hdl.handle.net",
        "identifiers.org",
        "n2t.net",
        "linkinghub.elsevier.com",
        "www.ncbi.nlm.nih.gov",
        "pubmed.ncbi.nlm.nih.gov",
        "pmc.ncbi.nlm.nih.gov",
    }
)
DEFAULT_DOI_RESOLVER_URL = "https://doi.org/"
DEFAULT_JUDGE_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_JUDGE_TIMEOUT = 30.0
DEFAULT_JUDGE_RETRIES = 2
DEFAULT_JUDGE_BACKOFF = 0.5
DEFAULT_JUDGE_CONCURRENCY = 8
# Bounded extraction (web/page.py): what one fetched body may cost, however it is built.
DEFAULT_MAX_HTML_CHARS = 10_000_000
DEFAULT_MAX_HTML_DEPTH = 256
DEFAULT_MAX_HTML_NODES = 150_000
DEFAULT_MAX_HTML_ATTRIBUTES = 64
DEFAULT_MAX_JSONLD_CHARS = 1_000_000
DEFAULT_MAX_PDF_PAGES = 300
DEFAULT_MAX_PDF_CHARS = 2_000_000
DEFAULT_MAX_PDF_PAGE_BYTES = 1024 * 1024
DEFAULT_MAX_PDF_SECONDS = 3.0


def _flatten(errors: Sequence[Mapping[str, Any]], prefix: tuple[Any, ...] = ()) -> list[Any]:
    """pydantic's error details, with a nested section's PolicyError unpacked in place."""
    out: list[Any] = []
    for e in errors:
        loc = (*prefix, *e.get("loc", ()))
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, PolicyError) and cause.errors:
            out += _flatten(cause.errors, loc)
        elif e.get("type") == "value_error" and cause is not None:
            out.append({**e, "loc": loc, "msg": str(cause)})
        else:
            out.append({**e, "loc": loc})
    return out


def _policy_error(exc: ValidationError) -> PolicyError:
    errors = _flatten(exc.errors(include_url=False))
    problems = "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or '(root)'}: {e['msg']}" for e in errors
    )
    return PolicyError(f"invalid {exc.title}: {problems}", errors)


class _Validated(BaseModel):
    """A frozen model whose construction raises PolicyError instead of ValidationError."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    if not TYPE_CHECKING:  # keep the typed __init__ the pydantic mypy plugin writes

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise _policy_error(exc) from None

        @classmethod
        def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
            try:
                return super().model_validate(obj, *args, **kwargs)
            except ValidationError as exc:
                raise _policy_error(exc) from None

        @classmethod
        def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
            try:
                return super().model_validate_json(json_data, *args, **kwargs)
            except ValidationError as exc:
                raise _policy_error(exc) from None

    def replace(self, **updates: Any) -> Self:
        """A validated copy with ``updates`` applied; raises PolicyError like the constructor.

        A field holding a section accepts a section object (used as is) or a mapping, which is
        merged into the current section (``policy.replace(fetch={"url_timeout": 5})`` keeps the
        other fetch settings). Other values replace the field's value whole.
        """
        data = {name: getattr(self, name) for name in type(self).model_fields}
        for name, value in updates.items():
            current = data.get(name)
            if isinstance(current, _Validated) and isinstance(value, Mapping):
                value = current.replace(**value)
            data[name] = value
        return type(self)(**data)


class _Section(_Validated):
    pass


class FetchPolicy(_Section):
    """Network limits. Every call has a timeout and every body a size cap."""

    connect_timeout: float = Field(DEFAULT_CONNECT_TIMEOUT, gt=0)
    url_timeout: float = Field(DEFAULT_URL_TIMEOUT, gt=0)
    answer_deadline: float = Field(DEFAULT_ANSWER_DEADLINE, gt=0)
    max_redirects: int = Field(DEFAULT_MAX_REDIRECTS, ge=0)
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    max_decompressed_bytes: int = Field(DEFAULT_MAX_DECOMPRESSED_BYTES, gt=0)
    # requests in flight at once in this process (a lease each, web/limits.py), and the URLs
    # one check (one fetch_all call) has under way at once: the next starts as one ends
    global_concurrency: int = Field(DEFAULT_GLOBAL_CONCURRENCY, gt=0)
    per_host_concurrency: int = Field(DEFAULT_PER_HOST_CONCURRENCY, gt=0)
    # Per-host limits (web/limits.py): per_host_rate requests to one host in any one-second
    # window (None: no rate limit), bursts included; the window the fetcher keeps is 1 s +
    # per_host_rate_margin, for the time between a grant and the request reaching the host.
    # With a shared Redis (Guard / Fetcher limits_redis=URL) per_host_concurrency and
    # per_host_rate hold across every replica using it, and a 429 / Retry-After pauses the host
    # for all of them; a Redis call that fails or takes over limits_redis_timeout seconds sends
    # the replica to its own limits for limits_fallback_seconds (with a finding).
    per_host_rate: int | None = Field(None, gt=0, le=10_000)
    per_host_rate_margin: float = Field(0.05, ge=0, le=1)
    limits_redis_timeout: float = Field(0.25, gt=0, le=10)
    limits_fallback_seconds: float = Field(30.0, ge=0)
    retries: int = Field(DEFAULT_RETRIES, ge=0)
    retry_backoff: float = Field(DEFAULT_RETRY_BACKOFF, ge=0)
    retry_after_cap: float = Field(DEFAULT_RETRY_AFTER_CAP, ge=0)
    positive_ttl: float = Field(DEFAULT_POSITIVE_TTL, ge=0)
    negative_ttl: float = Field(DEFAULT_NEGATIVE_TTL, ge=0)
    allow_private_addresses: bool = False
    # Host names whose private/loopback addresses are trusted even when allow_private_addresses
    # is False (e.g. an intranet docs site). Every other host, and every redirect hop, is checked.
    allowed_private_hosts: frozenset[str] = frozenset()
    allowed_schemes: frozenset[str] = frozenset({"http", "https"})
    # Identifier resolvers: hops, not destinations. A redirect from one of these hosts may
    # leave the site (doi.org → the publisher); the page it lands on is the one checked, and
    # from there the cross-site rule holds again. Every other host's redirects stay on its site.
    resolver_hosts: frozenset[str] = DEFAULT_RESOLVER_HOSTS
    # Where a DOI's resolver URL (https://doi.org/10.…) is sent: a mirror, or a test server
    # ("http://doi.test:8080/"); the citation keeps its doi.org URL.
    doi_resolver_url: str = DEFAULT_DOI_RESOLVER_URL
    user_agent: str = DEFAULT_USER_AGENT
    dns_cache_ttl: int = 300
    # Soft 404s: a short 200 page is compared with what its host serves for a made-up path
    # (one extra request per host, lychee-style); equal means the cited page does not exist.
    soft_404_probe: bool = True
    # Extraction bounds (web/page.py): a body past them is cut or partly skipped, never parsed
    # unbounded. HTML past max_html_chars, or after its max_html_nodes-th tag, is not parsed;
    # open tags nested deeper than max_html_depth and attributes of one element past
    # max_html_attributes are dropped (their text stays). These are work bounds: a document that
    # provably stays small on every axis (at most 4,000 "<", no element with max_html_attributes
    # attributes, little text per tag; web/page.py _small_enough) is parsed as it is.
    max_html_chars: int = Field(DEFAULT_MAX_HTML_CHARS, gt=0)
    max_html_depth: int = Field(DEFAULT_MAX_HTML_DEPTH, gt=0)
    max_html_nodes: int = Field(DEFAULT_MAX_HTML_NODES, gt=0)
    max_html_attributes: int = Field(DEFAULT_MAX_HTML_ATTRIBUTES, gt=0)
    # JSON-LD read per page, in characters; a block past it, or too deep to parse, is ignored
    max_jsonld_chars: int = Field(DEFAULT_MAX_JSONLD_CHARS, gt=0)
    # PDF text: pages read, characters kept, a page's content (decoded bytes of its content and
    # form streams; a heavier page is skipped) and seconds per document
    max_pdf_pages: int = Field(DEFAULT_MAX_PDF_PAGES, gt=0)
    max_pdf_chars: int = Field(DEFAULT_MAX_PDF_CHARS, gt=0)
    max_pdf_page_bytes: int = Field(DEFAULT_MAX_PDF_PAGE_BYTES, gt=0)
    max_pdf_seconds: float = Field(DEFAULT_MAX_PDF_SECONDS, gt=0)
    # Where pages are extracted when the Guard is given no executor (extract_worker.py):
    # "process", one niced child process (an extraction thread makes the event loop wait for
    # the GIL: 200 answers in flight, loop-lag p99 ~110 ms in a thread, ~14 ms in the child);
    # "thread", one thread; "auto" (default), a thread until the load is concurrent (8 pages
    # extracting at once), then the child (a one-off check does not pay its ~1 s start).
    # A page the child takes longer than extract_timeout seconds over, or more than
    # extract_memory_mb of address space, fails alone (unsupported_type, with the reason).
    extract_in: Literal["auto", "process", "thread"] = "auto"
    extract_timeout: float = Field(30.0, gt=0)
    extract_memory_mb: int = Field(2048, ge=256)
    extract_processes: int = Field(2, ge=1, le=64)  # child processes for "process" extraction


class PassagePolicy(_Section):
    """Quote and paraphrase matching."""

    check_passages: bool = True
    fuzzy_threshold: float = Field(90.0, ge=0, le=100)
    paraphrase_threshold: float = Field(0.35, ge=0, le=1)
    # A paraphrase below the threshold still goes to the entailer when the page covers at least
    # this share of its content words; below it the page holds nothing relevant
    # (passage_missing, a hard reject). None (the default): 0 (every paraphrase goes to the
    # entailer, which rejects what it can show unsupported) when the entailer can reject, 0.08
    # when it cannot (word overlap's calibrated bands have no rejection band). The 0.08 floor
    # rejected pairs that were only 68% unsupported on the development rows of the claims data
    # served as pages (benchmarks/results/hard_rejects.json), under the 90% a hard reject needs.
    relevance_floor: float | None = Field(None, ge=0, le=1)
    require_main_text: bool = False  # accept quotes found only in boilerplate?


class EntailmentPolicy(_Section):
    """Claim entailment."""

    check_entailment: bool = True
    # "auto": the local model (shipped in the package; its runtime is a base dependency), else
    # the judge when Policy.judge is configured, else word overlap (a weaker tier, reported)
    backend: Literal["auto", "local", "nli", "judge", "word_overlap", "none"] = "auto"
    model_path: str | None = None  # for backend="nli"; backend="judge" uses Policy.judge
    # the local scorer's sentence model: "auto" = all-MiniLM-L6-v2 as int8 on ONNX Runtime, the
    # model shipped in the package (~2.5x faster than torch); "torch" = fp32 on torch, for
    # those who ask (the [local] extra)
    encoder: Literal["auto", "onnx_int8", "torch"] = "auto"
    # the judge's confidence floor for "supported" (below it: uncertain), and the cut-off of
    # the legacy LocalWeights scorer; the other backends read their bands (below)
    support_threshold: float = Field(0.52, ge=0, le=1)
    contradiction_threshold: float = Field(0.5, ge=0, le=1)
    # claim support in three bands of P(supported): not_supported below ``reject_below``,
    # supported from ``accept_from``, uncertain between. None: the backend's own, chosen out of
    # fold on development data and shipped in its artefact (checks/support_model*.json,
    # checks/word_overlap_bands.json; NLI: uncalibrated defaults). docs/claim-support.md
    reject_below: float | None = Field(None, ge=0, le=1)
    accept_from: float | None = Field(None, ge=0, le=1)
    # what an uncertain claim does: "judge" asks Policy.judge about it (only the uncertain
    # claims, one request per page, within the run's cost budget); "warn" passes the citation
    # with a validity.support_uncertain warning; "fail" rejects it not_entailed. None: "judge"
    # when Policy.judge is configured, else "warn" (Policy.on_uncertain_mode resolves it)
    on_uncertain: Literal["judge", "warn", "fail"] | None = None
    # the languages (ISO 639-1) the local support model is shown to judge: its acceptances and
    # rejections meet the bands' precision on labelled data of the language (English: the data
    # it was fitted and banded on; Chinese measured and not: docs/claim-support.md). A claim
    # and evidence both in another language are judged by the deterministic checks alone
    # (numbers, names, near-copies, verbatim words); the rest is uncertain, the language named.
    model_languages: tuple[str, ...] = ("en",)

    @model_validator(mode="after")
    def _bands(self) -> EntailmentPolicy:
        lo, hi = self.reject_below, self.accept_from
        if lo is not None and hi is not None and lo > hi:
            raise ValueError("entailment.reject_below must not exceed entailment.accept_from")
        return self

    window_chars: int = Field(1200, gt=0)
    max_windows: int = Field(4, gt=0)  # evidence windows scored per pair (best lexical first)
    # sentences of a window the local model embeds (those sharing most words with the claim)
    max_sentences_embedded: int = Field(4, gt=0)
    batch_size: int = Field(32, gt=0)
    min_supported_share: float = Field(0.0, ge=0, le=1)  # share of claims that must be supported
    fail_unsupported: bool = True  # a claim whose citations are all unsupported fails validity


class DiversityPolicy(_Section):
    enabled: bool = True
    domain_floor: dict[str, int] = Field(
        default_factory=lambda: {"lookup": 1, "comparison": 2, "synthesis": 4}
    )
    per_domain_cap: int = Field(2, ge=1)
    min_primary_share: dict[str, float] = Field(
        default_factory=lambda: {"regulatory": 0.34, "legal": 0.34, "medical": 0.34}
    )
    question_class: str | None = None  # override the classifier
    # a question kind the cues cannot settle (QuestionClass.plausible: "why ...", "how did ...",
    # a long question): "lenient" applies the lowest domain floor of the kinds it may be and
    # reports diversity.class_uncertain; "strict" applies the guessed kind's floor
    uncertain_class: Literal["lenient", "strict"] = "lenient"


class FreshnessPolicy(_Section):
    enabled: bool = True
    floor_days: dict[str, float | None] = Field(
        default_factory=lambda: {"real_time": 2.0, "fast": 30.0, "slow": 365.0, "insensitive": None}
    )
    undated_counts_as_stale: bool = True
    require_caveat: bool = True
    # a cited page whose own dates (published, modified) are all more than this many days from
    # the date its search result showed the user is a finding (None: not compared)
    date_disagreement_days: float | None = Field(30.0, gt=0)
    # ask the LLM judge (Policy.judge) for the question's regime; falls back to the rules
    use_judge: bool = False
    # the cascade: with use_judge, the judge is asked only where the rules' regime is uncertain
    # (FreshnessClass.plausible not empty); False: every question (docs/freshness.md: cost)
    judge_only_uncertain: bool = True
    # classify the regime with the learned model (checks/regime_model.json, MiniLM embeddings)
    # instead of the rules. Off by default: one embedding per new question in one worker thread
    # serialised 200 concurrent guarded answers (wall 1.5 s -> 28 s in the in-flight benchmark;
    # not re-measured since). It only raises the rules' insensitive to slow; fitted on FreshQA
    # dev only (licences) and scored out of fold (issue 54), it adds nothing to the rules:
    # FreshQA 0.80 (rules 0.80), SituatedQA 0.895 (0.897), RealTimeQA 0.449, PAT 0.999.
    regime_model: bool = False
    # a regime the development data cannot vouch for (FreshnessClass.plausible holds slower
    # regimes too): "lenient" gates on the slowest plausible regime's floor and reports
    # freshness.regime_uncertain (the guess's verdict shown as warnings); "strict" gates on the
    # best guess, as before (held out on FreshQA: 61% right, 15% of slow/never taken as fast)
    uncertain_regime: Literal["lenient", "strict"] = "lenient"
    # in a guarded run (Guard.run, wrap, the integrations, serve, a held stream_run), a passing
    # answer citing sources stale under an uncertain faster regime gets this many attempts
    # asking for fresher sources (stale URLs not excluded; the attempt counts against
    # max_attempts and the budgets); the fresher answer wins if it passes with newer sources.
    # 0: no such attempt, the warning only (checks/freshness_ask.py)
    ask_fresher: int = Field(1, ge=0, le=1)
    # ... only when the guessed regime's confidence (regime_confidence.json: the share of the
    # rule's FreshQA dev questions at least as fast; an unknown confidence asks) is above this:
    # at 0 a rule none of whose questions was that fast is not asked about (on PAT, "the current
    # chair of X" was once guessed fast: 465 of 840 slow questions asked before, none after; the
    # rules now read it as a role's holder, slow)
    ask_min_confidence: float = Field(0.0, ge=0, le=1)


class QueryPolicy(_Section):
    enabled: bool = True
    gating: bool = False  # report and feed back by default; re-synthesis cannot fix a bad query
    min_score: float = Field(3.0, ge=1, le=5)
    # ask the LLM judge (Policy.judge) to grade the same rubric; falls back to the rules
    use_judge: bool = False


class JudgePolicy(_Section):
    """The one OpenAI-compatible chat-completions judge the axes may share.

    ``base_url`` is the API root (``.../v1``); the key is read from the environment variable
    ``api_key_env`` (no key: no ``Authorization`` header). 429, 5xx, connection errors,
    timeouts and malformed replies are retried ``retries`` times, waiting ``backoff`` seconds
    doubled each retry (or the server's ``Retry-After``, capped). ``concurrency`` bounds the
    entailment judge's requests in flight per ``score()`` call. The axes switch it on with
    ``entailment.backend="judge"``, ``freshness.use_judge`` and ``query.use_judge``.

    ``input_price_per_million`` / ``output_price_per_million`` price the tokens each reply's
    ``usage`` reports; a guarded run stops asking judges once their cost reaches
    ``Policy.cost_budget``. ``max_evidence_chars`` caps the page evidence of one entailment
    request (the claims citing one page are judged together).
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = DEFAULT_JUDGE_API_KEY_ENV
    timeout: float = Field(DEFAULT_JUDGE_TIMEOUT, gt=0)  # seconds per request
    retries: int = Field(DEFAULT_JUDGE_RETRIES, ge=0)  # extra attempts
    backoff: float = Field(DEFAULT_JUDGE_BACKOFF, ge=0)  # first retry wait, doubled each retry
    concurrency: int = Field(DEFAULT_JUDGE_CONCURRENCY, gt=0)
    # prices per million tokens, in the unit of Policy.cost_budget (0: free, cost stays 0)
    input_price_per_million: float = Field(0.0, ge=0)  # prompt tokens
    output_price_per_million: float = Field(0.0, ge=0)  # completion tokens
    # the entailment judge: page evidence (the claims' windows) in one request, in characters
    max_evidence_chars: int = Field(6000, gt=0)

    @property
    def configured(self) -> bool:
        """Whether an endpoint and a model are set."""
        return bool(self.base_url and self.model)


class ScholarlyPolicy(_Section):
    """Scholarly references (:mod:`citeguard.checks.scholarly`): a reference entry's title,
    authors, year and venue compared with the paper it points at (its landing page's scholarly
    tags, else the metadata service), and an entry with no link looked up by its title.

    ``crossref_url`` and ``arxiv_api_url`` are the services' roots (a mirror's, or a test
    server's: ``citeguard check --crossref-url URL --arxiv-api-url URL``); ``crossref_mailto`` is
    the contact address Crossref asks for to serve a client from its polite pool. ``rows``: the
    works a title search reads; ``max_lookups``: service requests one answer may make."""

    enabled: bool = True
    lookup_unlinked: bool = True
    crossref_url: str = "https://api.crossref.org/"
    arxiv_api_url: str = "https://export.arxiv.org/api/"
    crossref_mailto: str | None = None
    rows: int = Field(5, ge=1, le=20)
    max_lookups: int = Field(100, ge=0)


class Policy(_Validated):
    """Every threshold and switch. Frozen and validated: a bad value raises PolicyError.

    Make variants with :meth:`replace` (validated; section dicts merge into the current
    section)::

        policy = Policy().replace(fetch={"url_timeout": 5.0}, max_attempts=2)
        judged = policy.replace(
            judge={"base_url": "http://localhost:8000/v1", "model": "m"},
            query={"use_judge": True},
        )

    ``model_copy(update=...)`` does not validate; prefer ``replace``.
    """

    fetch: FetchPolicy = Field(default_factory=FetchPolicy)
    passage: PassagePolicy = Field(default_factory=PassagePolicy)
    entailment: EntailmentPolicy = Field(default_factory=EntailmentPolicy)
    diversity: DiversityPolicy = Field(default_factory=DiversityPolicy)
    freshness: FreshnessPolicy = Field(default_factory=FreshnessPolicy)
    query: QueryPolicy = Field(default_factory=QueryPolicy)
    judge: JudgePolicy = Field(default_factory=JudgePolicy)
    scholarly: ScholarlyPolicy = Field(default_factory=ScholarlyPolicy)

    # a search agent's answer must cite at least this many sources (0: uncited answers pass)
    min_citations: int = Field(1, ge=0)
    # how much of one answer is checked: past these an ``answer_too_large`` error fails validity
    # (time, memory and collector pauses grow with the claims an answer holds). 500 citations:
    # one check's objects then stay under what starts a full collection of the heap (a quarter
    # of it, ~15,000 objects); 1,000 pages cited and fetched started one (35-46 ms) mid-check
    max_answer_chars: int = Field(1_000_000, gt=0)
    max_claims: int = Field(2_000, gt=0)
    max_citations: int = Field(500, gt=0)
    unverifiable_fails: bool = True  # the gate is a hard gate: "could not tell" fails
    not_retrieved_fails: bool = False  # cited URL that no recorded search returned
    max_attempts: int = Field(3, ge=1)
    time_budget: float | None = Field(None, gt=0)  # wall-clock seconds for a whole guarded run
    cost_budget: float | None = Field(None, gt=0)
    on_fail: Literal["raise", "return", "strip", "report"] = "return"
    # before regenerating, mend failing citations from pages the run already holds
    # (citeguard.repair): "citations" swaps URLs only; "full" also corrects altered quotes to
    # the page's words and drops claims nothing supports
    repair: Literal["off", "citations", "full"] = "citations"

    @model_validator(mode="after")
    def _check(self) -> Policy:
        if self.fetch.url_timeout > self.fetch.answer_deadline:
            raise ValueError("fetch.url_timeout must not exceed fetch.answer_deadline")
        wanted = [
            name
            for name, on in (
                ("entailment.backend='judge'", self.entailment.backend == "judge"),
                ("freshness.use_judge", self.freshness.use_judge),
                ("query.use_judge", self.query.use_judge),
                ("entailment.on_uncertain='judge'", self.entailment.on_uncertain == "judge"),
            )
            if on
        ]
        if wanted and not self.judge.configured:
            raise ValueError(f"{', '.join(wanted)} needs judge.base_url and judge.model")
        return self

    @property
    def on_uncertain_mode(self) -> Literal["judge", "warn", "fail"]:
        """What an uncertain claim does: ``entailment.on_uncertain``, or by default "judge"
        when ``judge`` is configured and "warn" when it is not."""
        mode = self.entailment.on_uncertain
        if mode is not None:
            return mode
        return "judge" if self.judge.configured else "warn"

    @classmethod
    def for_tests(cls) -> Policy:
        """A policy that allows loopback/private addresses (for local test servers)."""
        return cls(fetch=FetchPolicy(allow_private_addresses=True))
