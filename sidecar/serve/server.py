"""Run the sidecar: both listeners, uvloop where available, and a graceful drain on SIGTERM.

On SIGTERM (or SIGINT) the sidecar marks itself not ready, stops accepting connections,
and lets in-flight responses finish for up to ``SIDECAR_DRAIN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry

from sidecar.images.remote import RemoteImageProber
from sidecar.serve.allocator import tune_allocator
from sidecar.serve.app import make_app, make_metrics_app
from sidecar.serve.keys import DRAIN, LOGGER, PROFILE
from sidecar.settings import Settings

SWITCH_INTERVAL_SECONDS = 0.001  # Python's default is 0.005


@dataclass(slots=True)
class RunningSidecar:
    """A started sidecar: its traffic app (collaborators under ``serve.keys``), its metrics
    registry and the ports it listens on."""

    app: web.Application
    registry: CollectorRegistry
    port: int
    metrics_port: int
    _runners: tuple[web.AppRunner, web.AppRunner]
    _stopped: asyncio.Task[None] | None = None

    async def drain_and_stop(self) -> None:
        """Refuse new work, let in-flight responses finish, then stop; a second call (the
        context manager's exit after an explicit drain) waits for the first."""
        if self._stopped is None:
            self.app[DRAIN].draining = True
            self._stopped = asyncio.ensure_future(self._cleanup())
        await asyncio.shield(self._stopped)

    async def _cleanup(self) -> None:
        traffic, metrics = self._runners
        await traffic.cleanup()
        await metrics.cleanup()


@contextlib.asynccontextmanager
async def running_sidecar(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    remote_prober: RemoteImageProber | None = None,
) -> AsyncIterator[RunningSidecar]:
    """Start both listeners (port 0 picks free ports); drain and stop on exit."""
    registry = registry or CollectorRegistry()
    app = make_app(settings, registry=registry, remote_prober=remote_prober)
    # A client that leaves cancels its handler: a queued request gives its place back at once,
    # and the upstream request is closed, so vLLM stops generating for nobody.
    traffic = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=float(settings.drain_seconds),
        handler_cancellation=True,
        auto_decompress=False,  # bodies go on as sent: no gzip bomb, true Content-Length
        keepalive_timeout=settings.client_read_timeout_seconds,
        lingering_time=_lingering_seconds(settings),
    )
    metrics = web.AppRunner(
        make_metrics_app(app, registry),
        access_log=None,
        keepalive_timeout=settings.client_read_timeout_seconds,
        lingering_time=_lingering_seconds(settings),
    )
    await traffic.setup()
    await metrics.setup()
    traffic_site = web.TCPSite(traffic, settings.listen_host, settings.port)
    metrics_site = web.TCPSite(metrics, settings.listen_host, settings.metrics_port)
    await traffic_site.start()
    await metrics_site.start()
    sidecar = RunningSidecar(
        app, registry, _bound_port(traffic), _bound_port(metrics), (traffic, metrics)
    )
    try:
        yield sidecar
    finally:
        await sidecar.drain_and_stop()


def _lingering_seconds(settings: Settings) -> float:
    """How long the rest of a refused body is read and dropped before the connection closes.

    SIDECAR_CLIENT_READ_TIMEOUT_SECONDS bounds every wait on a client (slowloris): it is
    aiohttp's keep-alive timeout, whose timer runs from the moment a connection opens (or its
    last answer ends) until a request's headers are complete, so it is also the header-read
    timeout, and an idle keep-alive connection closes after it; the body has the same timeout
    in ``proxy.read_body``; and a refused body is drained for no longer (10 s at most).
    """
    return min(settings.client_read_timeout_seconds, 10.0)


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the listener has no TCP address")


async def serve_until_signalled(settings: Settings) -> None:
    """The ``serve`` command: run until SIGTERM or SIGINT, then drain."""
    tuned = tune_allocator()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with running_sidecar(settings) as sidecar:
        tune_interpreter_for_latency()
        sidecar.app[LOGGER].info(
            "sidecar.started",
            port=sidecar.port,
            metrics_port=sidecar.metrics_port,
            upstream=str(settings.upstream_url),
            model=sidecar.app[PROFILE].name,
            mode=settings.mode.value,
            malloc_tuned=tuned,
        )
        await stop.wait()
        sidecar.app[LOGGER].info("sidecar.draining", drain_seconds=settings.drain_seconds)


def tune_interpreter_for_latency() -> None:
    """Two interpreter settings that keep the event loop answering while a heavy request is
    worked on (``bench/loop_lag.py``: the worst ``/healthz`` beside 2,000-image requests went
    from 55 ms to 9 ms).

    - Hide what start-up made (modules, the profile, the app: about 80,000 objects) from the
      garbage collector. A full collection walks every tracked object, 35 to 45 ms on the
      loop whenever allocation triggers one; frozen, they are never walked again, and they
      live as long as the process anyway.
    - Switch threads every 1 ms instead of 5. Large bodies are parsed in a worker thread;
      while it holds the GIL, the loop thread waits up to the switch interval each time it
      wants it back, and answering one request takes the loop several turns.
    """
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)


def event_loop_runner() -> asyncio.Runner:
    """An asyncio runner on uvloop where available."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)
