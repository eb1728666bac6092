"""The LoRA cross-encoder experiment for claim support (``python -m research.train_support_ce``).

MiniLM reads "claim [SEP] evidence" with LoRA adapters and a linear head. Not shipped: one CPU
epoch reached only 0.57 AUC on the calibration split, so ``LocalEntailer`` uses
:class:`citeguard.checks.support.SupportScorer`. Kept here, outside the package, to be rerun
where a GPU is at hand.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from citeguard.errors import EntailerError, MissingExtraError

# --------------------------------------------------------------------------------------------
# Cross-encoder experiment: MiniLM read "claim [SEP] evidence" with LoRA adapters. Not shipped:
# one CPU epoch (python -m research.train_support_ce) reached only 0.57 AUC on the calibration
# split, so no support_ce.safetensors is bundled and LocalEntailer uses SupportScorer above.
# --------------------------------------------------------------------------------------------

CE_ARTIFACT_PATH = Path(__file__).resolve().parent / "results" / "support_ce.safetensors"

# Where LoRA adapters go in each BERT layer (module paths relative to ``encoder.layer.<i>``).
LORA_TARGETS: tuple[str, ...] = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
# Stacked on the cross-encoder's logit: facts the deterministic checks found in the window.
STACK_FEATURES: tuple[str, ...] = (
    "ce_logit",
    "missing_numbers",
    "conflicting_numbers",
    "missing_names",
    "negation_flip",
    "coverage",
)


def stack_features(ce_logit: float, cons: Any) -> dict[str, float]:
    """The stacker's inputs: the cross-encoder logit and a :class:`Consistency`'s facts."""
    return {
        "ce_logit": float(ce_logit),
        "missing_numbers": float(min(3, len(cons.missing_numbers))),
        "conflicting_numbers": float(min(2, len(cons.conflicting_numbers))),
        "missing_names": float(min(3, len(cons.missing_entities))),
        "negation_flip": float(cons.negation_flip),
        "coverage": float(cons.coverage),
    }


@dataclass(frozen=True, slots=True)
class SupportStack:
    """σ(bias + Σ wᵢ·xᵢ) over :data:`STACK_FEATURES`: a calibrated P(supported).

    Fitted on a calibration split the cross-encoder never trained on, so the logistic fit is
    itself the (Platt-style) calibration; ``threshold`` is the macro-F1-best cut-off there.
    """

    weights: Mapping[str, float]
    bias: float
    threshold: float

    def probability(self, x: Mapping[str, float]) -> float:
        """Calibrated P(supported)."""
        z = self.bias + sum(w * x[name] for name, w in self.weights.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def add_lora(model: Any, rank: int, alpha: float) -> list[Any]:
    """Wrap the :data:`LORA_TARGETS` linears of a BERT ``model`` in trainable LoRA adapters.

    Returns the adapter modules (training only; inference merges them, see
    :func:`merge_adapters`). The base weights stay frozen.
    """
    import torch
    from torch import nn

    class LoRALinear(nn.Module):
        def __init__(self, base: nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
            self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
            nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
            self.scale = alpha / rank

        def forward(self, x: Any) -> Any:
            return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale

    adapters = []
    for layer in model.encoder.layer:
        for target in LORA_TARGETS:
            parent_path, _, attr = target.rpartition(".")
            parent = layer.get_submodule(parent_path)
            wrapped = LoRALinear(getattr(parent, attr))
            setattr(parent, attr, wrapped)
            adapters.append(wrapped)
    return adapters


def adapter_state(model: Any, head: Any, rank: int, alpha: float) -> dict[str, Any]:
    """What the artifact stores: LoRA factors, the (trained) LayerNorms and the head."""
    state: dict[str, Any] = {}
    for i, layer in enumerate(model.encoder.layer):
        for target in LORA_TARGETS:
            mod = layer.get_submodule(target)
            state[f"layer.{i}.{target}.lora_a"] = mod.lora_a.detach().clone()
            state[f"layer.{i}.{target}.lora_b"] = mod.lora_b.detach().clone()
    for name, p in model.named_parameters():
        if "LayerNorm" in name:
            state[f"ln.{name}"] = p.detach().clone()
    state["head.weight"] = head.weight.detach().clone()
    state["head.bias"] = head.bias.detach().clone()
    return state


def merge_adapters(model: Any, state: Mapping[str, Any], rank: int, alpha: float) -> Any:
    """Fold the stored adapters into a plain BERT ``model`` (W += B·A·α/r); returns the head."""
    import torch
    from torch import nn

    scale = alpha / rank
    with torch.no_grad():
        for i, layer in enumerate(model.encoder.layer):
            for target in LORA_TARGETS:
                lin = layer.get_submodule(target)
                a = state[f"layer.{i}.{target}.lora_a"].float()
                b = state[f"layer.{i}.{target}.lora_b"].float()
                lin.weight += (b @ a) * scale
        params = dict(model.named_parameters())
        for key, value in state.items():
            if key.startswith("ln."):
                params[key[3:]].copy_(value.float())
        w = state["head.weight"].float()
        head = nn.Linear(w.shape[1], 1)
        head.weight.copy_(w)
        head.bias.copy_(state["head.bias"].float())
    return head


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean of the token states under ``mask`` (sentence-transformers' pooling)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


class CrossEncoderScorer:
    """The bundled MiniLM read as a cross-encoder over (claim, evidence sentences).

    Loads the base weights from ``model_path`` (default: the bundled all-MiniLM-L6-v2, local
    files only), folds in the LoRA adapters, LayerNorms and head of ``artifact`` (default:
    ``support_ce.safetensors``), and keeps the stacker and threshold stored with them.
    Synchronous and for one caller at a time: run it in the entailer's worker thread.

    A cross-encoder reads claim and evidence together, so unlike a bi-encoder nothing about a
    page can be computed once and reused across claims.
    """

    def __init__(
        self,
        *,
        model_path: str | None = None,
        artifact: Path | None = None,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        self._model_path = model_path
        self._artifact = artifact or CE_ARTIFACT_PATH
        self._device = device
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, Any] | None = None
        self.config: dict[str, Any] = {}
        self.stack: SupportStack | None = None

    def _load(self) -> tuple[Any, Any, Any]:
        with self._lock:
            if self._loaded is None:
                try:
                    import torch  # noqa: F401  (reported as the missing extra)
                    from safetensors import safe_open
                    from transformers import AutoModel, AutoTokenizer
                except ImportError as exc:
                    raise MissingExtraError("sentence-transformers", "local") from exc
                from citeguard.checks.minilm import bundled_model_path

                path = self._model_path or str(bundled_model_path())
                try:
                    with safe_open(str(self._artifact), framework="pt") as f:
                        meta = f.metadata() or {}
                        state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
                    config = json.loads(meta["config"])
                    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
                    model = AutoModel.from_pretrained(path, local_files_only=True)
                except (OSError, ValueError, KeyError) as exc:
                    raise EntailerError(f"cannot load support model {path!r}: {exc}") from exc
                head = merge_adapters(model, state, int(config["rank"]), float(config["alpha"]))
                model.eval().to(self._device)
                head.eval().to(self._device)
                self.config = config
                stack = config["stack"]
                self.stack = SupportStack(
                    weights={k: float(v) for k, v in stack["weights"].items()},
                    bias=float(stack["bias"]),
                    threshold=float(stack["threshold"]),
                )
                self._loaded = (tokenizer, model, head)
            return self._loaded

    def load(self) -> SupportStack:
        """Load now (idempotent); returns the stacker."""
        self._load()
        assert self.stack is not None
        return self.stack

    def logits(
        self, pairs: Sequence[tuple[str, str]], batch_size: int | None = None
    ) -> npt.NDArray[np.float64]:
        """The raw cross-encoder logit of each (claim, evidence text) pair, in order.

        Pairs are sorted by length and batched (``batch_size``, default the constructor's) so
        a batch pads little.
        """
        if not pairs:
            return np.zeros(0)
        import torch

        tokenizer, model, head = self._load()
        max_len = int(self.config["max_len"])
        enc = tokenizer(
            [c for c, _ in pairs],
            [e for _, e in pairs],
            truncation="longest_first",
            max_length=max_len,
        )
        ids: list[list[int]] = enc["input_ids"]
        types: list[list[int]] = enc["token_type_ids"]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros(len(ids))
        with torch.inference_mode():
            size = batch_size or self._batch_size
            for start in range(0, len(order), size):
                chunk = order[start : start + size]
                width = max(len(ids[i]) for i in chunk)
                x = torch.zeros((len(chunk), width), dtype=torch.long)
                t = torch.zeros_like(x)
                m = torch.zeros_like(x)
                for row, i in enumerate(chunk):
                    n = len(ids[i])
                    x[row, :n] = torch.tensor(ids[i])
                    t[row, :n] = torch.tensor(types[i])
                    m[row, :n] = 1
                x, t, m = x.to(self._device), t.to(self._device), m.to(self._device)
                hidden = model(input_ids=x, attention_mask=m, token_type_ids=t).last_hidden_state
                z = head(mean_pool(hidden, m)).squeeze(-1).float().cpu().numpy()
                out[chunk] = z
        return out
