"""admission.saturation: the gate that holds new requests while vLLM reports saturation.

The waits run on a virtual clock (``tests.support.virtual_time``): no real sleeping.
"""

from __future__ import annotations

import asyncio

import pytest

from sidecar.admission.saturation import SaturationGate
from sidecar.errors import EngineSaturatedError
from tests.support.virtual_time import run_in_virtual_time


@pytest.mark.parametrize(
    ("usage", "waiting", "saturated"),
    [
        (None, None, False),
        (0.94, 9, False),
        (0.95, None, True),
        (None, 10, True),
        (0.99, 50, True),
    ],
    ids=["nothing-reported", "under-both", "kv-usage-at-limit", "waiting-at-limit", "both"],
)
def test_saturation_gate_closes_at_either_threshold(
    usage: float | None, waiting: float | None, saturated: bool
) -> None:
    gate = SaturationGate(kv_usage_threshold=0.95, waiting_threshold=10)
    gate.update(usage, waiting)
    assert gate.saturated is saturated
    assert bool(gate.reason) is saturated


def test_saturation_gate_names_every_figure_over_its_threshold() -> None:
    gate = SaturationGate(kv_usage_threshold=0.9, waiting_threshold=4)
    gate.update(0.97, 6)
    assert gate.reason == (
        "vllm:kv_cache_usage_perc is 0.97, at or above SIDECAR_SATURATION_KV_USAGE 0.9; "
        "vllm:num_requests_waiting is 6, at or above SIDECAR_SATURATION_WAITING_REQUESTS 4"
    )
    gate.update(0.5, 0)
    assert (gate.saturated, gate.reason) == (False, "")


def test_saturation_gate_without_thresholds_never_closes() -> None:
    gate = SaturationGate(kv_usage_threshold=None, waiting_threshold=None)
    gate.update(1.0, 10_000)
    assert not gate.saturated


def test_saturation_gate_lets_a_waiter_through_once_vllm_has_room() -> None:
    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        gate = SaturationGate(kv_usage_threshold=0.95, waiting_threshold=None)
        await gate.wait(timeout_seconds=0)  # open: returns at once
        gate.update(0.99, None)
        loop.call_later(2.5, gate.update, 0.5, None)
        started = loop.time()
        await gate.wait(timeout_seconds=10)
        return started, loop.time()

    started, ended = run_in_virtual_time(scenario)
    assert ended - started == pytest.approx(2.5, abs=1e-3)


def test_saturation_gate_answers_429_when_vllm_stays_saturated_past_the_timeout() -> None:
    async def scenario() -> EngineSaturatedError:
        gate = SaturationGate(kv_usage_threshold=None, waiting_threshold=3)
        gate.update(None, 7)
        with pytest.raises(EngineSaturatedError) as caught:
            await gate.wait(timeout_seconds=2.4)
        return caught.value

    error = run_in_virtual_time(scenario)
    assert error.status == 429
    assert error.retry_after_seconds == 2
    assert error.message == (
        "vLLM is saturated (vllm:num_requests_waiting is 7, at or above "
        "SIDECAR_SATURATION_WAITING_REQUESTS 3) and stayed so for 2.4 s; retry later (this "
        "replica is busy, not the service: another replica may serve it now)"
    )
