"""Every request's first stop: read its path as vLLM would, then inspect, forward or refuse.

The route table (``sidecar.routes``) decides: a POST to an inspected route goes through the
whole pipeline (``proxy``); read-only routes, and GET, HEAD and OPTIONS anywhere vLLM
serves nothing, are forwarded unchanged; admin routes follow ``SIDECAR_ADMIN_ROUTES`` and
other requests that could make vLLM work follow ``SIDECAR_UNKNOWN_ROUTES``. In shadow mode
nothing is refused: what enforce mode would refuse is forwarded as sent and counted.

``GET /metrics`` is vLLM's exposition with the two router gauges of ``observe.router_load``
appended, so an endpoint picker that scrapes the pod's serving port sees the sidecar's queue
and in-flight KV beside vLLM's own series (every other ``/metrics*`` request passes through).

A request that says ``Expect: 100-continue`` gets its refusal (a 413 for a declared body over
``SIDECAR_MAX_BODY_BYTES``, or a refused route) before it uploads anything.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from sidecar.errors import (
    AdminRouteError,
    BodyTooLargeError,
    SidecarError,
    UnknownRouteError,
    UpstreamError,
    UpstreamTimeoutError,
)
from sidecar.observe.router_load import append_to_exposition
from sidecar.routes import ApiShape, PathKind
from sidecar.serve.keys import METRICS, ROUTER_LOAD, SETTINGS, UPSTREAM
from sidecar.serve.paths import AmbiguousPathError, Target, read_target
from sidecar.serve.proxy import handle_inspected
from sidecar.serve.relay import (
    HOP_BY_HOP_HEADERS,
    Forward,
    forwardable_headers,
    relay,
    stream_request_body,
)
from sidecar.serve.responses import response_for_error
from sidecar.settings import Mode, RoutePolicy

_READ_ONLY_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))


async def dispatch(request: web.Request) -> web.StreamResponse:
    """Inspect, forward or refuse one request."""
    try:
        target = read_target(request.raw_path)
    except AmbiguousPathError as exc:
        return await _refuse_or_shadow(request, exc, kind="ambiguous", raw=True)
    if target.redirect_to is not None:
        _count(request, "redirect", "answered")
        return _redirect(target)
    refusal = _refusal(request, target)
    if refusal is not None:
        return await _refuse_or_shadow(request, refusal, kind=target.kind.value, target=target)
    if target.route is not None and request.method == "POST":
        return await handle_inspected(request, target.route, target.path_qs)
    _count(request, target.kind.value, "forwarded")
    if target.kind is PathKind.METRICS and target.path == "/metrics" and request.method == "GET":
        return await metrics_with_router_load(request, target.path_qs)
    return await passthrough(request, target.path_qs)


async def expect_continue(request: web.Request) -> web.StreamResponse | None:
    """Answer ``Expect: 100-continue``: refuse before the upload when the request would be."""
    if request.headers.get("Expect", "").lower() != "100-continue":
        return None  # aiohttp answers any other expectation with 417 by itself
    refusal: SidecarError | None = None
    api = ApiShape.OPENAI
    try:
        target = read_target(request.raw_path)
    except AmbiguousPathError as exc:
        refusal = exc
    else:
        refusal = _refusal(request, target) or _body_too_large(request)
        api = target.route.api if target.route is not None else api
    shadow = request.app[SETTINGS].mode is Mode.SHADOW
    if refusal is not None and not shadow:
        response = response_for_error(refusal, api=api)
        response.force_close()  # the body was never sent; nothing may be read as a next request
        return response
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0
    return None


def _refusal(request: web.Request, target: Target) -> SidecarError | None:
    """Why enforce mode refuses this request before reading it, or None."""
    settings = request.app[SETTINGS]
    method = request.method
    if target.kind is PathKind.ADMIN and settings.admin_routes is RoutePolicy.REJECT:
        return AdminRouteError(
            f"{method} {target.path} is one of vLLM's admin routes; the sidecar refuses them "
            "(set SIDECAR_ADMIN_ROUTES=pass to forward them)"
        )
    unpriced = target.kind is PathKind.UNPRICEABLE or (
        target.kind is PathKind.UNKNOWN and method not in _READ_ONLY_METHODS
    )
    if unpriced and settings.unknown_routes is RoutePolicy.REJECT:
        why = (
            "cannot be priced by the sidecar"
            if target.kind is PathKind.UNPRICEABLE
            else "is not a route of vLLM 0.33 that the sidecar knows"
        )
        return UnknownRouteError(
            f"{method} {target.path} {why}; it is refused so that no unpriced work reaches "
            "vLLM (set SIDECAR_UNKNOWN_ROUTES=pass to forward such requests unpriced)"
        )
    return None


def _body_too_large(request: web.Request) -> BodyTooLargeError | None:
    limit = int(request.app[SETTINGS].max_body_bytes)
    declared = request.content_length
    if declared is not None and declared > limit:
        return BodyTooLargeError(
            f"request body of {declared:,} bytes exceeds SIDECAR_MAX_BODY_BYTES ({limit:,})"
        )
    return None


async def _refuse_or_shadow(
    request: web.Request,
    refusal: SidecarError,
    *,
    kind: str,
    target: Target | None = None,
    raw: bool = False,
) -> web.StreamResponse:
    if request.app[SETTINGS].mode is Mode.SHADOW:
        _count(request, kind, "forwarded")
        path_qs = request.raw_path if raw or target is None else target.path_qs
        return await passthrough(request, path_qs)
    _count(request, kind, "refused")
    route = target.route if target is not None else None
    return response_for_error(refusal, api=route.api if route is not None else ApiShape.OPENAI)


def _redirect(target: Target) -> web.Response:
    """vLLM's own answer to a trailing slash, with a Location that names no host."""
    stripped = Target(target.redirect_to or "/", target.kind, target.query)
    return web.Response(status=307, headers={"Location": stripped.path_qs})


def _count(request: web.Request, kind: str, action: str) -> None:
    request.app[METRICS].uninspected(kind, action).inc()


async def metrics_with_router_load(request: web.Request, path_qs: str) -> web.StreamResponse:
    """vLLM's ``/metrics`` answer, uncompressed, with the router gauges added when it is a 200."""
    upstream = request.app[UPSTREAM]
    headers = forwardable_headers(request.headers)
    headers.popall("Accept-Encoding", None)  # the gauges are appended to plain text
    try:
        async with upstream.session.get(upstream.url(path_qs), headers=headers) as answer:
            body = await answer.read()
            status, answer_headers = answer.status, answer.headers
    except TimeoutError:
        return response_for_error(UpstreamTimeoutError("vLLM's /metrics did not answer in time"))
    except aiohttp.ClientError as exc:
        return response_for_error(UpstreamError(f"vLLM's /metrics failed: {type(exc).__name__}"))
    content_type = answer_headers.get("Content-Type", "")
    if status == 200 and answer_headers.get("Content-Encoding", "identity") == "identity":
        body = append_to_exposition(body, content_type, request.app[ROUTER_LOAD])
    dropped = HOP_BY_HOP_HEADERS | {"content-length"}
    kept = CIMultiDict((k, v) for k, v in answer_headers.items() if k.lower() not in dropped)
    return web.Response(status=status, body=body, headers=kept)


async def passthrough(request: web.Request, path_qs: str) -> web.StreamResponse:
    """Forward a request the sidecar does not inspect, and relay the answer unchanged."""
    upstream = request.app[UPSTREAM]
    extra: Mapping[str, str] = {}
    if request.content_length is not None:
        extra = {"Content-Length": str(request.content_length)}
    forward = Forward(
        url=upstream.url(path_qs),
        body=stream_request_body(request) if request.body_exists else None,
        headers=forwardable_headers(request.headers, extra),
        response_headers=CIMultiDict(),
        upstream_origin=upstream.base_url,
    )
    try:
        return (await relay(request, upstream.session, forward)).response
    except UpstreamError as exc:
        return response_for_error(exc)
