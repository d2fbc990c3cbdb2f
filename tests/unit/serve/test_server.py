"""serve.server: both listeners on free ports, the drain on stop, uvloop, and the interpreter
settings ``vlm-sidecar serve`` applies once it has started."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import aiohttp
from prometheus_client import CollectorRegistry

from sidecar.serve.server import event_loop_runner, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.proxy_helpers import fault, ledger_is_idle, post
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.waiting import eventually, eventually_refused

SCRIPT = """
import gc, sys
import sidecar.serve.app  # start-up's imports: what there is to freeze
before = sys.getswitchinterval(), gc.get_freeze_count()
from sidecar.serve.server import tune_interpreter_for_latency
tune_interpreter_for_latency()
print(*before, sys.getswitchinterval(), gc.get_freeze_count())
"""


def test_start_up_objects_are_frozen_and_threads_switch_every_millisecond() -> None:
    result = subprocess.run(  # noqa: S603 - our own module, fixed argv
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    interval_before, frozen_before, interval_after, frozen_after = result.stdout.split()
    assert (float(interval_before), int(frozen_before)) == (0.005, 0)
    assert float(interval_after) == 0.001
    assert int(frozen_after) > 50_000  # aiohttp, pydantic, structlog, the sidecar's modules


async def test_running_sidecar_listens_on_free_ports_and_closes_both_on_exit(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    settings = Settings(
        model=QWEN, upstream_url=standin.url, listen_host="127.0.0.1", port=0, metrics_port=0
    )
    async with running_sidecar(settings, registry=CollectorRegistry()) as sidecar:
        assert 0 not in (sidecar.port, sidecar.metrics_port)
        assert sidecar.port != sidecar.metrics_port
        async with session.get(f"http://127.0.0.1:{sidecar.metrics_port}/healthz") as response:
            assert response.status == 200
    await eventually_refused(sidecar.port)
    await eventually_refused(sidecar.metrics_port)


async def test_drain_and_stop_lets_an_answer_in_flight_finish(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(drain_seconds=5)
    body = chat_with_images(jpeg_uri(32, 32))
    answer = asyncio.ensure_future(post(session, sidecar, body, headers=fault("delay=0.3")))
    await eventually(lambda: not ledger_is_idle(sidecar))
    await sidecar.drain_and_stop()
    assert (await answer).status == 200
    await eventually_refused(sidecar.port)
    await sidecar.drain_and_stop()  # a second call, as the context manager's exit makes


def test_event_loop_runner_runs_on_uvloop() -> None:
    with event_loop_runner() as runner:
        loop = runner.get_loop()
        assert type(loop).__module__.startswith("uvloop")
