"""The one place that turns a failure into an HTTP answer, in the client's API shape.

OpenAI routes get vLLM's body, ``{"error": {"message", "type", "param", "code"}}`` with
the HTTP status equal to ``code`` and ``type`` named as vLLM names its errors. Anthropic
routes get Anthropic's, ``{"type": "error", "error": {"type", "message"}}``, with vLLM's
status-to-type map; Cohere routes get Cohere's, ``{"message", "id"}``, as vLLM's Cohere
middleware rewrites them. Whether a client should retry is said in headers the official SDKs
read: ``Retry-After`` and ``x-should-retry: true`` on a 429 that may succeed later,
``x-should-retry: false`` on an answer no retry can change. ``x-vlm-sidecar-retry-scope``
says where a retry can succeed, for gateways that retry across replicas: ``other-replica``
on a 429 (this replica is busy; another, or this one after ``Retry-After``, may serve it),
``none`` where no replica with the same budgets ever will.
"""

from __future__ import annotations

from http import HTTPStatus

import orjson
from aiohttp import web

from sidecar.errors import (
    OverloadedError,
    RequestTimeoutError,
    SidecarError,
    error_type_for,
)
from sidecar.routes import ApiShape

RETRY_SCOPE_HEADER = "x-vlm-sidecar-retry-scope"

# vLLM's ``_ANTHROPIC_ERROR_TYPE_BY_STATUS``.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_body(
    status: int,
    message: str,
    *,
    error_type: str,
    param: str | None,
    api: ApiShape = ApiShape.OPENAI,
    request_id: str = "",
) -> bytes:
    """The JSON error body for one failure."""
    if api is ApiShape.COHERE:
        return orjson.dumps({"message": message, "id": request_id})
    if api is ApiShape.ANTHROPIC:
        kind = _ANTHROPIC_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return orjson.dumps(
        {"error": {"message": message, "type": error_type, "param": param, "code": status}}
    )


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    api: ApiShape = ApiShape.OPENAI,
    retry_after_seconds: int | None = None,
    retryable: bool | None = None,
    headers: dict[str, str] | None = None,
    error_type: str | None = None,
) -> web.Response:
    """An error answer in the route's shape; ``retryable`` False tells SDKs not to retry."""
    all_headers = dict(headers or {})
    if retry_after_seconds is not None:
        all_headers["Retry-After"] = str(retry_after_seconds)
        if status == HTTPStatus.TOO_MANY_REQUESTS and retryable is None:
            retryable = True
            all_headers[RETRY_SCOPE_HEADER] = "other-replica"
    if retryable is not None:
        all_headers["x-should-retry"] = "true" if retryable else "false"
    if retryable is False:
        all_headers[RETRY_SCOPE_HEADER] = "none"
    return web.Response(
        status=status,
        body=error_body(
            status,
            message,
            error_type=error_type or error_type_for(status),
            param=param,
            api=api,
            request_id=all_headers.get("x-request-id", ""),
        ),
        content_type="application/json",
        headers=all_headers,
    )


def response_for_error(
    exc: SidecarError, *, api: ApiShape = ApiShape.OPENAI, headers: dict[str, str] | None = None
) -> web.Response:
    """The answer for a raised ``SidecarError``."""
    response = error_response(
        exc.status,
        exc.message,
        param=exc.param,
        api=api,
        retry_after_seconds=exc.retry_after_seconds if isinstance(exc, OverloadedError) else None,
        retryable=exc.retryable,
        headers=headers,
        error_type=exc.error_type,
    )
    if isinstance(exc, RequestTimeoutError):
        response.force_close()  # the rest of a slow body may still be on its way
    return response
