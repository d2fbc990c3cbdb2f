"""The stand-in's HTTP face: routes, faults, request recording, and a runner for tests.

Inference routes read the whole body, record it, then apply the fault (the config's, or the one
named by the ``x-standin-fault`` header) before answering.  The runner cancels handlers whose
client left and stops within ``_SHUTDOWN_SECONDS``, so a hung request never stalls a test.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from sidecar.engine.counts import CALIBRATION_HEADER
from sidecar.standin.config import Fault, StandinConfig
from sidecar.standin.metrics import EngineCounters, make_registry
from sidecar.standin.replies import (
    ROUTES,
    PrefixCache,
    StandinRequestError,
    check_request,
    count_tokens_answer,
    error_body,
    invalid_json_error,
    json_answer,
    malformed,
    model_list,
    plan_completion,
    stream_events,
    tokenize_answer,
)

FAULT_HEADER = "x-standin-fault"
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
_MAX_BODY_BYTES = 1 << 30
_POLL_SECONDS = 0.02
_SHUTDOWN_SECONDS = 1.0
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class RecordedRequest:
    """One request exactly as it arrived."""

    method: str
    path: str
    query_string: str
    headers: CIMultiDictProxy[str]
    body: bytes


class StandinState:
    """The engine the stand-in pretends to run: config, counters and the requests it got.

    ``config`` may be replaced whole at any time (``dataclasses.replace``); the setters below
    cover the common cases.
    """

    def __init__(self, config: StandinConfig) -> None:
        self.config = config
        self.requests: list[RecordedRequest] = []
        self.calibrations: list[RecordedRequest] = []  # the sidecar's /tokenize self-checks
        self.counters = EngineCounters()
        self.registry = make_registry(lambda: self.config, self.counters)
        self.closing = False
        self.prefix_cache = PrefixCache()
        self._streams_flowing = asyncio.Event()
        self._streams_flowing.set()

    def hold_streams(self) -> None:
        """From now on, SSE answers send their first event and then wait, open, until
        ``release_streams()`` (a benchmark holds thousands of streams open at once this way)."""
        self._streams_flowing.clear()

    def release_streams(self) -> None:
        """Let every held stream, and every later one, run to its end."""
        self._streams_flowing.set()

    def set_healthy(self, healthy: bool) -> None:
        self.config = dataclasses.replace(self.config, healthy=healthy)

    def set_cache_config(
        self,
        *,
        num_gpu_blocks: int | None = None,
        block_size: int | None = None,
        max_model_len: int | None = None,
        data_parallel_size: int | None = None,
    ) -> None:
        """Pretend the engine restarted with another KV pool, context length or engine count
        (``num_gpu_blocks`` is each data-parallel engine's)."""
        self._change(
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            max_model_len=max_model_len,
            data_parallel_size=data_parallel_size,
        )

    def set_load(
        self,
        *,
        kv_cache_usage_perc: float | None = None,
        num_requests_waiting: int | None = None,
        num_requests_running: int | None = None,
    ) -> None:
        """Set the load gauges; ``num_requests_running`` adds to the requests really in flight."""
        self._change(
            kv_cache_usage_perc=kv_cache_usage_perc,
            num_requests_waiting=num_requests_waiting,
            num_requests_running=num_requests_running,
        )

    def add_preemptions(self, count: int = 1) -> None:
        self.counters.preemptions += count

    def _change(self, **changes: Any) -> None:
        given = {name: value for name, value in changes.items() if value is not None}
        self.config = dataclasses.replace(self.config, **given)

    def record(self, request: web.Request, body: bytes) -> None:
        if self.config.record_requests:
            headers = CIMultiDictProxy(CIMultiDict(request.headers))
            recorded = RecordedRequest(
                request.method, request.path, request.query_string, headers, body
            )
            # The sidecar's own calls to learn image costs are not traffic it forwarded.
            calibrating = CALIBRATION_HEADER in request.headers
            (self.calibrations if calibrating else self.requests).append(recorded)


STATE = web.AppKey("standin_state", StandinState)


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


def _error(status: int, message: str | None = None, **kwargs: Any) -> web.Response:
    return _json(error_body(status, message, **kwargs), status)


def _drop(request: web.Request, *, reset: bool) -> None:
    transport = request.transport
    if transport is not None:
        (transport.abort if reset else transport.close)()


def _gone(request: web.Request, state: StandinState) -> bool:
    transport = request.transport
    return state.closing or transport is None or transport.is_closing()


async def _until_gone(request: web.Request, state: StandinState) -> None:
    while not _gone(request, state):  # noqa: ASYNC110 -- a departed client shows only as a closing transport
        await asyncio.sleep(_POLL_SECONDS)


def _parse(raw: bytes) -> Mapping[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid_json_error(raw) from None
    if not isinstance(body, dict):
        raise invalid_json_error(raw)
    return body


def _anthropic(request: web.Request) -> bool:
    """Whether vLLM answers errors on this path in Anthropic's envelope."""
    return request.path.startswith("/v1/messages")


async def _stream(
    request: web.Request,
    events: list[bytes],
    delay_seconds: float,
    reset_after: int | None,
    flowing: asyncio.Event,
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": SSE_CONTENT_TYPE})
    try:
        await response.prepare(request)
        for index, event in enumerate(events):
            if index:
                await flowing.wait()  # returns at once unless streams are held
            if index and delay_seconds:
                await asyncio.sleep(delay_seconds)
            if index == reset_after:
                _drop(request, reset=True)
                break
            await response.write(event)
    except ConnectionResetError:
        pass  # the client left (before the headers, or mid-stream): nobody to finish for
    return response


async def _cut(request: web.Request, payload: bytes) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(payload)
    await response.prepare(request)
    await response.write(payload[: len(payload) // 2])
    _drop(request, reset=True)
    return response


async def _answer(request: web.Request, state: StandinState, raw: bytes) -> web.StreamResponse:
    config, anthropic = state.config, _anthropic(request)
    header = request.headers.get(FAULT_HEADER)
    try:
        fault = config.fault if header is None else Fault.parse(header)
    except ValueError as exc:
        raise StandinRequestError(400, str(exc), param=FAULT_HEADER) from exc
    if fault.first_byte_delay_seconds:
        await asyncio.sleep(fault.first_byte_delay_seconds)
    if fault.close_before_headers:
        _drop(request, reset=False)
        return web.Response()
    if fault.hang:
        await _until_gone(request, state)
        return _error(503, anthropic=anthropic)
    if fault.status is not None:
        return _error(fault.status, anthropic=anthropic)
    body = _parse(raw)
    check_request(config, request.path, body)
    cached, created = state.prefix_cache.lookup(config, body, config.prompt_tokens_fn(body))
    completion = plan_completion(
        config,
        request.path,
        body,
        request_id=request.headers.get("x-request-id"),
        cached_tokens=cached,
        created_cache_tokens=created,
    )
    state.counters.observe(completion.prompt_tokens, completion.completion_tokens)
    if body.get("stream") is True:
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        events = stream_events(
            config,
            completion,
            include_usage=options.get("include_usage") is True,
            continuous_usage=options.get("continuous_usage_stats") is True,
        )
        delay = fault.chunk_delay_seconds
        delay = config.chunk_delay_seconds if delay is None else delay
        events = malformed(events) if fault.malformed else events
        return await _stream(
            request, events, delay, fault.reset_after_chunks, state._streams_flowing
        )
    payload = orjson.dumps(json_answer(config, completion))
    if fault.malformed:
        payload = payload[: len(payload) // 2]
    if fault.reset_after_chunks is not None:
        return await _cut(request, payload)
    return web.Response(body=payload, content_type="application/json")


async def _inference(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    raw = await request.read()
    state.record(request, raw)
    state.counters.in_flight += 1
    try:
        return await _answer(request, state, raw)
    except StandinRequestError as exc:
        return _refusal(request, exc)
    finally:
        state.counters.in_flight -= 1


def _refusal(request: web.Request, exc: StandinRequestError) -> web.Response:
    return _error(
        exc.status, exc.message, param=exc.param, anthropic=_anthropic(request), kind=exc.kind
    )


async def _counting(request: web.Request) -> web.Response:
    """``/v1/messages/count_tokens`` and ``/tokenize``: vLLM renders, counts, runs nothing."""
    state = request.app[STATE]
    raw = await request.read()
    state.record(request, raw)
    try:
        body = _parse(raw)
        # The sidecar's own synthetic images are known to load: not decoded here, so that a
        # test counting the pixels its process decodes sees only the traffic's.
        if CALIBRATION_HEADER not in request.headers:
            check_request(state.config, request.path, body)
        # A prompt_tokens_fn may refuse too, as vLLM's processor refuses a size.
        if request.path == "/tokenize":
            return _json(tokenize_answer(state.config, body))
        return _json(count_tokens_answer(state.config, body))
    except StandinRequestError as exc:
        return _refusal(request, exc)


async def _version(request: web.Request) -> web.Response:
    return _json({"version": request.app[STATE].config.version})


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200 if request.app[STATE].config.healthy else 503)


async def _models(request: web.Request) -> web.Response:
    return _json(model_list(request.app[STATE].config))


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[STATE].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})


async def _echo(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await request.read()
    state.record(request, body)
    under_echo = request.path == "/echo" or request.path.startswith("/echo/")
    if under_echo and request.method in _BODY_METHODS:
        content_type = request.headers.get("Content-Type", "application/octet-stream")
        return web.Response(body=body, headers={"Content-Type": content_type})
    return _json(
        {
            "method": request.method,
            "path": request.path,
            "query_string": request.query_string,
            "query": list(request.query.items()),
            "headers": list(request.headers.items()),
            "body_bytes": len(body),
        }
    )


async def _on_shutdown(app: web.Application) -> None:
    app[STATE].closing = True


def _build_app(state: StandinState) -> web.Application:
    app = web.Application(client_max_size=_MAX_BODY_BYTES)
    app[STATE] = state
    app.on_shutdown.append(_on_shutdown)
    for route in ROUTES:
        app.router.add_post(route, _inference)
    app.router.add_post("/v1/messages/count_tokens", _counting)
    app.router.add_post("/tokenize", _counting)
    app.router.add_get("/version", _version)
    app.router.add_get("/health", _health)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/metrics", _metrics)
    app.router.add_route("*", "/{tail:.*}", _echo)
    return app


def make_standin_app(config: StandinConfig | None = None) -> web.Application:
    """A stand-in vLLM app; its state (requests, setters) is ``app[STATE]``."""
    return _build_app(StandinState(config or StandinConfig()))


class StandinServer(StandinState):
    """A running stand-in: its state, where to reach it, and how to stop it."""

    def __init__(self, config: StandinConfig, host: str) -> None:
        super().__init__(config)
        self.host, self.port = host, 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def close(self) -> None:
        """Stop listening and finish (or cancel) the requests in flight; idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


async def start_standin(
    config: StandinConfig | None = None, host: str = "127.0.0.1", port: int = 0
) -> StandinServer:
    """Serve a stand-in on ``host:port`` (0 picks a free port) until ``close()``."""
    server = StandinServer(config or StandinConfig(), host)
    runner = web.AppRunner(
        _build_app(server),
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=_SHUTDOWN_SECONDS,
    )
    await runner.setup()
    server._runner = runner
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await server.close()
        raise
    server.port = int(runner.addresses[0][1])
    return server


@asynccontextmanager
async def run_standin(
    config: StandinConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[StandinServer]:
    """``async with run_standin(config) as server:`` -- started on entry, closed on exit."""
    server = await start_standin(config, host, port)
    try:
        yield server
    finally:
        await server.close()
