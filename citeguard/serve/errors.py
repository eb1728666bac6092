"""Errors in each API's own shape: OpenAI's error object on the OpenAI routes and /v1/check,
Anthropic's ``{"type": "error", "error": {...}}`` on /v1/messages. Never a traceback."""

from __future__ import annotations

from typing import Any, Literal

from starlette.responses import JSONResponse

from citeguard.errors import CiteguardError

__all__ = ["ApiError", "Flavor", "error_body", "error_response", "flavor_of"]

Flavor = Literal["openai", "anthropic"]

# OpenAI error types by status (what its API answers), Anthropic's likewise
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
}


class ApiError(CiteguardError):
    """An error answer: the HTTP status, a stable ``code`` and a message for the user."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        type: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.type = type
        self.headers = headers or {}
        self.extra = extra or {}


def flavor_of(path: str) -> Flavor:
    return "anthropic" if path.startswith("/v1/messages") else "openai"


def error_body(flavor: Flavor, err: ApiError) -> dict[str, Any]:
    if flavor == "anthropic":
        kind = err.type or _ANTHROPIC_TYPES.get(err.status, "api_error")
        return {
            "type": "error",
            "error": {"type": kind, "message": err.message, "code": err.code},
            **err.extra,
        }
    kind = err.type or _OPENAI_TYPES.get(err.status, "api_error")
    return {
        "error": {"type": kind, "code": err.code, "message": err.message, "param": None},
        **err.extra,
    }


def error_response(flavor: Flavor, err: ApiError) -> JSONResponse:
    return JSONResponse(error_body(flavor, err), status_code=err.status, headers=err.headers)
