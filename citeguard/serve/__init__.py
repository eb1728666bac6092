"""``citeguard serve``: the guard as an HTTP service (the ``serve`` extra: FastAPI, uvicorn,
prometheus-client). Nothing else in citeguard imports this package.

* :func:`create_app` — the ASGI app for a :class:`Settings` (its Guard on ``app.state.guard``);
* ``citeguard serve`` — runs it under uvicorn (:mod:`citeguard.serve.main`).

See docs/serve.md. The app is imported lazily, so ``citeguard --help`` works without the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from citeguard.serve.settings import Settings

if TYPE_CHECKING:
    from citeguard.serve.app import CheckRequest, create_app

__all__ = ["CheckRequest", "Settings", "create_app"]


def __getattr__(name: str) -> Any:
    if name in ("create_app", "CheckRequest"):
        try:
            from citeguard.serve import app
        except ImportError as e:
            from citeguard.errors import MissingExtraError

            raise MissingExtraError(e.name or "fastapi", "serve") from e
        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
