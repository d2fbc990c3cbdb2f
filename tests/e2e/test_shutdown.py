"""Graceful shutdown of a real ``python -m sidecar serve`` process under load.

The sidecar runs as a subprocess configured only by ``SIDECAR_*`` variables, in front of the
stand-in (in the test's process); everything is on 127.0.0.1. SIGTERM must: let the streams in
flight finish, refuse new connections at once, answer ``/readyz`` 503 while draining, cut what
outlasts SIDECAR_DRAIN_SECONDS, and exit 0 within it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest

from sidecar.standin import StandinServer
from tests.support.imaging import chat
from tests.support.proxy_helpers import CHAT
from tests.support.sidecars import QWEN
from tests.support.waiting import eventually, eventually_refused

STARTUP_SECONDS = 60.0


@dataclass
class SidecarProcess:
    """A ``python -m sidecar serve`` child, its ports, and its log events so far."""

    process: asyncio.subprocess.Process
    port: int = 0
    metrics_port: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def url(self, path: str = CHAT) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


async def _read_events(child: SidecarProcess, started: asyncio.Event) -> None:
    stderr = child.process.stderr
    if stderr is None:
        raise RuntimeError("stderr is not piped")
    while line := await stderr.readline():
        with contextlib.suppress(orjson.JSONDecodeError):
            event = orjson.loads(line)
            child.events.append(event)
            if event.get("event") == "sidecar.started":
                child.port, child.metrics_port = event["port"], event["metrics_port"]
                started.set()


@contextlib.asynccontextmanager
async def sidecar_process(upstream_url: str, **settings: str) -> AsyncIterator[SidecarProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")}
    env |= {
        "SIDECAR_MODEL": QWEN,
        "SIDECAR_UPSTREAM_URL": upstream_url,
        "SIDECAR_LISTEN_HOST": "127.0.0.1",
        "SIDECAR_PORT": "0",
        "SIDECAR_METRICS_PORT": "0",
        "SIDECAR_ENGINE_POLL_SECONDS": "0",
        "SIDECAR_LOG_FORMAT": "json",
    }
    env |= {f"SIDECAR_{name.upper()}": value for name, value in settings.items()}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sidecar",
        "serve",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    child = SidecarProcess(process)
    started = asyncio.Event()
    reader = asyncio.create_task(_read_events(child, started))
    try:
        async with asyncio.timeout(STARTUP_SECONDS):
            await started.wait()
        yield child
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await reader


STREAM = chat(stream=True, max_tokens=8)


async def test_sigterm_lets_streams_finish_refuses_new_connections_and_exits_0_within_drain(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    drain_seconds = 6
    async with sidecar_process(standin.url, drain_seconds=str(drain_seconds)) as child:
        headers = {"x-standin-fault": "chunk-delay=0.2"}  # 11 events: about 2 s a stream
        streams = [await session.post(child.url(), json=STREAM, headers=headers) for _ in range(3)]
        firsts = [await stream.content.readany() for stream in streams]
        loop = asyncio.get_running_loop()
        signalled_at = loop.time()
        child.process.send_signal(signal.SIGTERM)

        await eventually_refused(child.port)
        async with session.get(f"http://127.0.0.1:{child.metrics_port}/readyz") as ready:
            assert (ready.status, (await ready.json())["status"]) == (503, "draining")
        for stream, first in zip(streams, firsts, strict=True):
            whole = first + await stream.read()
            stream.release()
            assert stream.status == 200
            assert whole.endswith(b"data: [DONE]\n\n")
            assert whole.count(b"data: ") == 10  # role, 8 words (the finish on the 8th), [DONE]
        async with asyncio.timeout(drain_seconds):
            assert await child.process.wait() == 0
        assert loop.time() - signalled_at < drain_seconds
    assert any(event["event"] == "sidecar.draining" for event in child.events)
    finished = [event for event in child.events if event["event"] == "request.finished"]
    assert [event["upstream_completed"] for event in finished] == [True] * 3


async def test_sigterm_cuts_a_stream_that_outlasts_drain_seconds_and_still_exits_0(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    drain_seconds = 1
    async with sidecar_process(standin.url, drain_seconds=str(drain_seconds)) as child:
        headers = {"x-standin-fault": "chunk-delay=1"}  # about 11 s of stream
        stream = await session.post(child.url(), json=STREAM, headers=headers)
        await stream.content.readany()
        assert standin.counters.in_flight == 1
        loop = asyncio.get_running_loop()
        signalled_at = loop.time()
        child.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(drain_seconds + 5):
            assert await child.process.wait() == 0
        assert loop.time() - signalled_at < drain_seconds + 3.0  # the interpreter's exit included
        with contextlib.suppress(aiohttp.ClientPayloadError):
            await stream.read()  # ends: cut off, not hanging
        stream.release()
        await eventually(lambda: standin.counters.in_flight == 0)  # vLLM stopped too


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_an_idle_sidecar_exits_0_at_once_on_a_stop_signal(
    standin: StandinServer, signum: signal.Signals
) -> None:
    async with sidecar_process(standin.url, drain_seconds="30") as child:
        loop = asyncio.get_running_loop()
        signalled_at = loop.time()
        child.process.send_signal(signum)
        async with asyncio.timeout(10):
            assert await child.process.wait() == 0
        assert loop.time() - signalled_at < 2.0
