"""The one place that turns a failure into an HTTP answer, in the client's API shape.

OpenAI routes get vLLM's body, ``{"error": {"message", "type", "param", "code"}}`` with
the HTTP status equal to ``code``. ``/v1/messages`` gets Anthropic's,
``{"type": "error", "error": {"type", "message"}}``, with vLLM's status-to-type map.
"""

from __future__ import annotations

from http import HTTPStatus

import orjson
from aiohttp import web

from sidecar.errors import OverloadedError, RequestTimeoutError, SidecarError

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_body(
    status: int, message: str, *, error_type: str, param: str | None, anthropic: bool
) -> bytes:
    """The JSON error body for one failure."""
    if anthropic:
        kind = _ANTHROPIC_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return orjson.dumps(
        {"error": {"message": message, "type": error_type, "param": param, "code": status}}
    )


def error_type_for(status: int) -> str:
    """vLLM's ``type`` for a status: ``BadRequestError`` for 400, else the HTTP phrase."""
    return "BadRequestError" if status == HTTPStatus.BAD_REQUEST else HTTPStatus(status).phrase


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    anthropic: bool = False,
    retry_after_seconds: int | None = None,
    headers: dict[str, str] | None = None,
    error_type: str | None = None,
) -> web.Response:
    """An error answer in the route's shape."""
    all_headers = dict(headers or {})
    if retry_after_seconds is not None:
        all_headers["Retry-After"] = str(retry_after_seconds)
    return web.Response(
        status=status,
        body=error_body(
            status,
            message,
            error_type=error_type or error_type_for(status),
            param=param,
            anthropic=anthropic,
        ),
        content_type="application/json",
        headers=all_headers,
    )


def response_for_error(
    exc: SidecarError, *, anthropic: bool, headers: dict[str, str] | None = None
) -> web.Response:
    """The answer for a raised ``SidecarError``."""
    response = error_response(
        exc.status,
        exc.message,
        param=exc.param,
        anthropic=anthropic,
        retry_after_seconds=exc.retry_after_seconds if isinstance(exc, OverloadedError) else None,
        headers=headers,
        error_type=exc.error_type,
    )
    if isinstance(exc, RequestTimeoutError):
        response.force_close()  # the rest of a slow body may still be on its way
    return response
