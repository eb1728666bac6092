"""The NLI backend (:class:`NLIEntailer`): any MNLI-style cross-encoder on disk."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from citeguard.checks._consistency import clean_claim
from citeguard.checks.bands import NLI_BANDS, SupportBands
from citeguard.checks.entail.base import Pair, _empty_score
from citeguard.checks.entail.executor import _ExecutorOwner
from citeguard.checks.entail.windows import _candidate_windows, _Window
from citeguard.errors import EntailerError, MissingExtraError
from citeguard.models import EntailmentLabel, EntailmentScore
from citeguard.policy import EntailmentPolicy

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
