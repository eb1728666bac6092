"""One base for the objects that hold a connection pool, a session or a worker thread.

``async with X(...) as x:`` closes ``x`` on the way out through its ``aclose()``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    """Mixin: ``__aenter__`` returns the object, ``__aexit__`` awaits its ``aclose()``."""

    async def aclose(self) -> None:
        """Release what the object holds; subclasses override this."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


__all__ = ["AsyncClosing"]
