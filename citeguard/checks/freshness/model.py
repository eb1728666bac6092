"""The learned regime model: a logistic model over the question's MiniLM embedding and the rules'
cues (``regime_model.json``), run off the event loop."""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from citeguard.checks.freshness.artifact import RegimeModelError, _json_artifact
from citeguard.checks.freshness.confidence import MODEL_RAISE_LABEL, _with_confidence
from citeguard.checks.freshness.rules import (
    _MAX_QUESTION_CHARS,
    REGIME_FEATURE_NAMES,
    regime_features,
)
from citeguard.errors import CiteguardError
from citeguard.models import (
    FreshnessClass,
    Regime,
)
from citeguard.text import fold_whitespace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


# --------------------------------------------------------------------------------------------
# Learned regime model
# --------------------------------------------------------------------------------------------

#: the classes the learned model tells apart: does the answer change over time at all? How fast
#: it changes stays the rules' call (see :meth:`RegimeModel.decide`): no training source labels
#: slow against fast without a style confound (templated Wikidata questions are all slow, weekly
#: news quizzes all fast)
REGIME_CLASSES: tuple[str, ...] = ("insensitive", "changing")
#: the shipped weights, written by training/train_regime.py
REGIME_MODEL_PATH = Path(__file__).parent.with_name("regime_model.json")  # in checks/
_REGIME_MODEL_FORMAT = "citeguard-regime-model/2"
_EMBEDDING_DIM = 384
_TOP_FEATURES = 3
_TRAILING_PUNCTUATION_RE = re.compile(r"[\s?.!]+$")


def regime_embedding_text(question: str) -> str:
    """The text the regime model embeds: whitespace folded, lower case, no closing "?", "." or
    "!". SituatedQA, the only source that labels never-changing questions, writes them as
    lower-case search queries without a question mark, so a model fitted on raw text learns
    "ends with ?" as "changing" (the other sources all end with one)."""
    text = fold_whitespace(question[:_MAX_QUESTION_CHARS])
    return _TRAILING_PUNCTUATION_RE.sub("", text).lower()


class RegimeModel:
    """Binary logistic regression, P(the answer changes over time), over a question's
    all-MiniLM-L6-v2 embedding and its cue-rule features (:func:`regime_features`), fitted by
    training/train_regime.py. It can only add caution to the rules: see :meth:`decide`.

    The artifact is plain JSON (standardisation, weights, intercept, threshold); the math is
    numpy.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        import numpy as np

        if data.get("format") != _REGIME_MODEL_FORMAT:
            raise RegimeModelError(f"not a regime model: format {data.get('format')!r}")
        if tuple(data.get("classes", ())) != REGIME_CLASSES:
            raise RegimeModelError(f"regime model classes {data.get('classes')!r} are unknown")
        if tuple(data.get("features", ())) != REGIME_FEATURE_NAMES:
            raise RegimeModelError("regime model features differ from regime_features()")
        dim = _EMBEDDING_DIM + len(REGIME_FEATURE_NAMES)
        try:
            self._coef = np.asarray(data["coef"], dtype=np.float64)
            self._intercept = float(data["intercept"])
            self._mean = np.asarray(data["mean"], dtype=np.float64)
            self._scale = np.asarray(data["scale"], dtype=np.float64)
            self.threshold = float(data["threshold"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RegimeModelError(f"malformed regime model: {exc}") from exc
        shapes = (self._coef.shape, self._mean.shape, self._scale.shape)
        if shapes != ((dim,), (dim,), (dim,)) or not (self._scale > 0).all():
            raise RegimeModelError(f"malformed regime model: shapes {shapes}")
        if not 0.0 < self.threshold < 1.0:
            raise RegimeModelError(f"regime model threshold {self.threshold} is not in (0, 1)")
        self.names: tuple[str, ...] = (
            *(f"embedding[{i}]" for i in range(_EMBEDDING_DIM)),
            *REGIME_FEATURE_NAMES,
        )
        self.meta: dict[str, Any] = dict(data.get("trained") or {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegimeModel:
        return cls(data)

    @staticmethod
    @functools.cache
    def load(path: Path = REGIME_MODEL_PATH) -> RegimeModel:
        """The model in ``path`` (the shipped one by default), read once per process."""
        return RegimeModel(_json_artifact(path, "regime model"))

    def features(
        self, embedding: Sequence[float] | npt.NDArray[np.float64], values: Sequence[float]
    ) -> npt.NDArray[np.float64]:
        import numpy as np

        vector = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if vector.shape != (_EMBEDDING_DIM,):
            raise RegimeModelError(f"embedding of shape {vector.shape}, not ({_EMBEDDING_DIM},)")
        return np.concatenate([vector, np.asarray(values, dtype=np.float64)])

    def probabilities(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """P(class) for :data:`REGIME_CLASSES`, from the full feature vector ``x``."""
        import numpy as np

        z = (np.asarray(x, dtype=np.float64) - self._mean) / self._scale
        logit = float(self._coef @ z) + self._intercept
        changing = 0.5 * (1.0 + np.tanh(0.5 * logit))  # the logistic, without overflow
        return np.array([1.0 - changing, changing])

    def top_features(self, x: npt.NDArray[np.float64], k: int) -> list[tuple[str, float]]:
        """The present features that pushed most towards class ``k`` of
        :data:`REGIME_CLASSES`, with the embedding's dimensions summed into one entry."""
        import numpy as np

        z = (np.asarray(x, dtype=np.float64) - self._mean) / self._scale
        push = (1.0 if k == 1 else -1.0) * self._coef * z
        out = [("embedding", float(push[:_EMBEDDING_DIM].sum()))]
        out += [
            (self.names[j], float(push[j]))
            for j in range(_EMBEDDING_DIM, len(self.names))
            if x[j] != 0.0
        ]
        out.sort(key=lambda item: -item[1])
        return [(name, round(v, 3)) for name, v in out[:_TOP_FEATURES] if v > 0]

    def decide(
        self, probabilities: npt.NDArray[np.float64], rules: tuple[Regime, str, str]
    ) -> Regime:
        """The regime: the rules', except that a question the rules call insensitive is slow
        when the model says its answer changes (P(changing) above the artifact's threshold).
        The model never lowers the rules' regime: held out, lowering turned 9 to 29% of the
        weekly news questions (RealTimeQA) insensitive and fixed nothing on FreshQA."""
        if rules[0] is Regime.INSENSITIVE and float(probabilities[1]) > self.threshold:
            return Regime.SLOW
        return rules[0]


# One embedding model per process, loaded on first use by whichever thread needs it.
_ENCODER_LOCK = threading.Lock()
_ENCODER: Any = None


def _sentence_encoder() -> Any:
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            from citeguard.checks.onnx_minilm import OnnxMiniLMEncoder

            encoder = OnnxMiniLMEncoder(threads=1)
            try:
                encoder.load()
            except CiteguardError as exc:
                raise RegimeModelError(f"cannot load the embedding model: {exc}") from exc
            _ENCODER = encoder
        return _ENCODER


def embed_questions(questions: Sequence[str]) -> list[npt.NDArray[np.float64]]:
    """Unit-length all-MiniLM-L6-v2 sentence embeddings of ``questions`` (the shipped int8
    encoder, :class:`~citeguard.checks.onnx_minilm.OnnxMiniLMEncoder`: mean-pooled, one
    question a pass), each read as :func:`regime_embedding_text`.

    Blocks: loading the model the first time takes most of a second, so call it off the event
    loop.
    """
    import numpy as np

    if not questions:
        return []
    encoded = _sentence_encoder().encode([regime_embedding_text(q) for q in questions])
    return [np.asarray(e.vector, dtype=np.float64) for e in encoded]


class ModelFreshnessClass(FreshnessClass):
    """A :class:`FreshnessClass` from :class:`LearnedRegimeClassifier`, with what decided it.

    ``backend`` is ``"model"``, or ``"rules"`` when the model could not run (``fallback`` says
    why). ``probabilities`` are the model's, by class (insensitive, changing: how fast an answer
    changes is the rules' call); ``top_features`` the present features that pushed most towards
    the model's class; ``rules_regime`` the deterministic rules' own answer.
    """

    backend: Literal["model", "rules"]
    probabilities: dict[str, float] = Field(default_factory=dict)
    top_features: list[str] = Field(default_factory=list)
    rules_regime: Regime
    fallback: str | None = None


#: the errors that make the learned classifier fall back to the rules
_MODEL_UNAVAILABLE = (ImportError, OSError, CiteguardError)


class LearnedRegimeClassifier:
    """The question's regime by :class:`RegimeModel`, the rules as features and as fallback.

    The embedding model (all-MiniLM-L6-v2, int8 on ONNX Runtime, shipped in the package) loads
    once per process, on first use, in this classifier's own worker thread; :meth:`classify`
    runs inference there too, so the event loop never blocks on it. Results are remembered per
    question and year (the features depend on ``now`` only through its year), up to
    ``cache_size`` questions. Without its runtime, or with an unreadable artifact or model
    file, every question gets the rules' regime with the reason in ``fallback`` (and a
    ``freshness.regime_fallback`` finding on the axis).

    ``model`` and ``embed`` replace the shipped artifact and the MiniLM encoder (tests).
    """

    def __init__(
        self,
        model: RegimeModel | None = None,
        *,
        embed: Callable[[Sequence[str]], Sequence[Sequence[float]]] | None = None,
        cache_size: int = 512,
    ) -> None:
        self._model = model
        self._embed = embed or embed_questions
        self._cache_size = cache_size
        self._seen: dict[tuple[str, int], ModelFreshnessClass] = {}
        self._unavailable: str | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    @property
    def unavailable(self) -> str | None:
        """Why the model cannot run, once a classification found out; else ``None``."""
        return self._unavailable

    def classify_sync(self, question: str, *, now: datetime | None = None) -> ModelFreshnessClass:
        """:meth:`classify` in the calling thread (blocks: the first call loads the model)."""
        today = now or datetime.now(UTC)
        key = (question, today.year)
        hit = self._seen.get(key)
        if hit is not None:
            return hit
        fclass = self._classify(question, today)
        self._seen[key] = fclass
        while len(self._seen) > self._cache_size:
            self._seen.pop(next(iter(self._seen)), None)
        return fclass

    async def classify(self, question: str, *, now: datetime | None = None) -> FreshnessClass:
        """The model's regime for ``question``, computed in the classifier's worker thread."""
        today = now or datetime.now(UTC)
        hit = self._seen.get((question, today.year))
        if hit is not None:
            return hit
        loop = asyncio.get_running_loop()
        call = functools.partial(self.classify_sync, question, now=today)
        return await loop.run_in_executor(self._worker(), call)

    async def warm_up(self) -> None:
        """Load the artifact and the embedding model now, off the event loop."""
        await self.classify("What is the capital of France?", now=datetime.now(UTC))

    async def aclose(self) -> None:
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    def _worker(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="citeguard-regime")
            return self._executor

    def _classify(self, question: str, today: datetime) -> ModelFreshnessClass:
        values, rules = regime_features(question, now=today)
        rules_regime, rules_label, rules_cue = rules
        if self._unavailable is None:
            try:
                model = self._model if self._model is not None else RegimeModel.load()
                x = model.features(self._embed([question])[0], values)
            except _MODEL_UNAVAILABLE as exc:
                self._unavailable = f"{type(exc).__name__}: {exc}"
            else:
                probs = model.probabilities(x)
                regime = model.decide(probs, rules)
                k = int(probs.argmax())
                top = [f"{name} ({v:+.2f})" for name, v in model.top_features(x, k)]
                by_class = {
                    c: round(float(p), 4) for c, p in zip(REGIME_CLASSES, probs, strict=True)
                }
                shown = ", ".join(f"{c} {p:.2f}" for c, p in by_class.items())
                cues = [f"model: {REGIME_CLASSES[k]} ({shown})"]
                if regime is not rules_regime:
                    cues.append(
                        f"the model overrules the rules' {rules_regime.value}: the answer changes "
                        f"(P {by_class['changing']:.2f} > {model.threshold:g}), so {regime.value}"
                    )
                cues.append(f"rules: {rules_regime.value} ({rules_cue})")
                if top:
                    cues.append("top features: " + ", ".join(top))
                fc = ModelFreshnessClass(
                    regime=regime,
                    cues=cues,
                    backend="model",
                    probabilities=by_class,
                    top_features=top,
                    rules_regime=rules_regime,
                )
                label = MODEL_RAISE_LABEL if regime is not rules_regime else rules_label
                return _with_confidence(fc, label)
        reason = self._unavailable
        fc = ModelFreshnessClass(
            regime=rules_regime,
            cues=[f"regime model unavailable ({reason}); deterministic rules used", rules_cue],
            backend="rules",
            rules_regime=rules_regime,
            fallback=reason,
        )
        return _with_confidence(fc, rules_label)
