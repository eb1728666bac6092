"""The regime artifacts' shared reader and its error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from citeguard.errors import CiteguardError


class RegimeModelError(CiteguardError):
    """The regime model's artifact or embedding model could not be loaded."""


def _json_artifact(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``, or :class:`RegimeModelError` saying why not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RegimeModelError(f"cannot read {what} {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict):
        raise RegimeModelError(f"{str(path)!r} is not a {what}")
    return data
