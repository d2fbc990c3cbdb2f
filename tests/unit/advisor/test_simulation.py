"""advisor.simulation: the ledger replayed over recorded arrivals, checked case by case and
against the real ``KvLedger`` driven through the same jobs on a virtual clock."""

from __future__ import annotations

import asyncio
import random

import pytest

from sidecar.admission.discipline import DEFAULT_CLASS, QueueClass
from sidecar.admission.ledger import KvLedger
from sidecar.advisor.simulation import Fate, Job, Jobs, Queueing, simulate
from sidecar.errors import OverloadedError, QueueFullError, ShedError
from tests.support.virtual_time import run_in_virtual_time

G, W, T, F, S = Fate.GRANTED, Fate.WAITED, Fate.QUEUE_TIMEOUT, Fate.QUEUE_FULL, Fate.SHED


def columns(jobs: list[Job]) -> Jobs:
    """Jobs as the ledger reads them: a column per field."""
    return Jobs(*(list(column) for column in zip(*jobs, strict=True))) if jobs else Jobs([], [], [])


def fates(jobs: list[Job], budget: int, timeout: float = 1.0, depth: int = 100) -> list[Fate]:
    return list(simulate(columns(jobs), Queueing(budget, timeout, depth)).fates)


def test_without_a_budget_every_job_is_granted_and_counted() -> None:
    result = simulate(columns([Job(0, 5, 1), Job(0.5, 7, 1), Job(2, 1, 1)]), Queueing(0, 1, 10))
    assert result.fates == (G, G, G)
    assert (result.peak_kv_bytes, result.peak_requests) == (12, 2)


def test_a_waiter_is_granted_when_a_release_makes_room() -> None:
    result = simulate(columns([Job(0, 6, 1.0), Job(0.2, 6, 1.0)]), Queueing(10, 5, 10))
    assert result.fates == (G, W)
    assert result.waits[1] == pytest.approx(0.8)


def test_grants_follow_arrival_order_even_when_a_later_job_would_fit() -> None:
    jobs = [Job(0, 6, 1.0), Job(0.1, 6, 1.0), Job(0.2, 1, 0.1)]
    assert fates(jobs, budget=10, timeout=5) == [G, W, W]
    assert simulate(columns(jobs), Queueing(10, 5, 10)).waits[2] == pytest.approx(0.8)  # with job 1


def test_a_waiter_leaves_after_the_timeout_and_the_next_one_may_then_fit() -> None:
    jobs = [Job(0, 8, 5.0), Job(0.1, 8, 1.0), Job(0.5, 2, 1.0)]
    assert fates(jobs, budget=10, timeout=1) == [G, T, W]


def test_a_full_queue_refuses_at_once() -> None:
    jobs = [Job(0, 10, 5.0), Job(0.1, 1, 1.0), Job(0.2, 1, 1.0)]
    assert fates(jobs, budget=10, timeout=1, depth=1) == [G, T, F]


def test_a_zero_timeout_never_waits() -> None:
    assert fates([Job(0, 10, 5.0), Job(0.1, 1, 1.0)], budget=10, timeout=0) == [G, T]


def test_a_release_at_the_deadline_grants_before_the_timeout() -> None:
    assert fates([Job(0, 10, 1.0), Job(0.0, 5, 1.0)], budget=10, timeout=1) == [G, W]


def test_shadow_mode_never_queues_but_marks_what_decide_would_make_wait() -> None:
    result = simulate(columns([Job(0, 8, 1), Job(0.1, 8, 1)]), Queueing(10, 1, 1, shadow=True))
    assert result.fates == (G, G)
    assert result.would_wait == (False, True)
    assert result.peak_kv_bytes == 16


async def live_ledger(
    jobs: list[Job],
    budget: int,
    wait_seconds: int,
    depth: int,
    classes: list[QueueClass] | None = None,
    tenant_depth: int = 0,
    aging_seconds: float = 0.0,
) -> list[Fate]:
    """The real ledger through the same jobs: each client arrives, acquires, holds, releases."""
    loop = asyncio.get_running_loop()
    ledger = KvLedger(
        budget,
        max_queue_depth=depth,
        max_tenant_queue_depth=tenant_depth,
        aging_seconds=aging_seconds,
    )

    async def client(job: Job, queue_class: QueueClass) -> Fate:
        await asyncio.sleep(job.arrival - loop.time())
        try:
            reservation = await ledger.acquire(job.kv_bytes, wait_seconds, queue_class)
        except QueueFullError:
            return F
        except ShedError:
            return S
        except OverloadedError:
            return T
        await asyncio.sleep(job.held_seconds)
        reservation.release()
        return W if reservation.waited_seconds > 0 else G

    classes = classes or [DEFAULT_CLASS] * len(jobs)
    return list(await asyncio.gather(*map(client, jobs, classes)))


def random_jobs(rng: random.Random) -> list[Job]:
    """150 jobs over 20 s, enough to fill a budget of 100 and queue."""
    return sorted(
        (Job(rng.uniform(0, 20), rng.randint(1, 60), rng.uniform(0.1, 3)) for _ in range(150)),
        key=lambda job: job.arrival,
    )


@pytest.mark.parametrize("seed", range(20))
def test_the_simulation_decides_as_the_real_ledger_does(seed: int) -> None:
    rng = random.Random(seed)
    jobs = random_jobs(rng)
    depth, timeout = rng.choice([2, 5, 100]), rng.choice([1, 2])
    expected = fates(jobs, budget=100, timeout=timeout, depth=depth)
    actual = run_in_virtual_time(lambda: live_ledger(jobs, 100, timeout, depth), tick_seconds=1e-7)
    assert actual == expected
    assert {W, T} <= set(expected)  # the load makes jobs wait and time out


@pytest.mark.parametrize("seed", range(5))
def test_requests_not_forwarded_pass_by(seed: int) -> None:
    rng = random.Random(seed)
    jobs = random_jobs(rng)
    queueing = Queueing(100, rng.choice([1, 2]), rng.choice([2, 5, 100]))
    rows: list[tuple[float, int | None, float]] = []
    forwarded = []
    for job in jobs:
        if rng.random() < 0.3:  # refused, arriving at the same time: the ledger never sees it
            rows.append((job.arrival, None, 0.0))
        forwarded.append(len(rows))
        rows.append(job)
    arrivals, kv_bytes, helds = zip(*rows, strict=True)
    alone = simulate(columns(jobs), queueing)
    mixed = simulate(Jobs(arrivals, kv_bytes, helds), queueing)
    assert [mixed.fates[n] for n in forwarded] == list(alone.fates)
    assert [mixed.waits[n] for n in forwarded] == list(alone.waits)
    passing = set(range(len(rows))) - set(forwarded)
    assert {mixed.fates[n] for n in passing} == {G}
    assert {mixed.waits[n] for n in passing} == {0.0}
    assert (mixed.peak_kv_bytes, mixed.peak_requests) == (alone.peak_kv_bytes, alone.peak_requests)
    assert {W} <= set(alone.fates)


@pytest.mark.parametrize("seed", range(20))
def test_the_simulation_with_bands_and_tenants_decides_as_the_real_ledger_does(seed: int) -> None:
    rng = random.Random(seed)
    jobs = random_jobs(rng)
    kinds = [QueueClass(0), QueueClass(5), QueueClass(-1, sheddable=True)]
    classes = [
        QueueClass(kind.priority, kind.sheddable, rng.choice(["", "a", "b", "c"]))
        for kind in (rng.choice(kinds) for _ in jobs)
    ]
    depth, timeout = rng.choice([5, 100]), rng.choice([1, 2])
    tenant_depth, aging = rng.choice([0, 3]), rng.choice([0.0, 0.5])
    queueing = Queueing(100, timeout, depth, max_tenant_depth=tenant_depth, aging_seconds=aging)
    expected = simulate(columns(jobs)._replace(classes=classes), queueing).fates
    actual = run_in_virtual_time(
        lambda: live_ledger(jobs, 100, timeout, depth, classes, tenant_depth, aging),
        tick_seconds=1e-7,
    )
    assert actual == list(expected)
    assert {W, S} <= set(expected)  # the load makes jobs wait and sheds some


def test_the_simulation_serves_a_higher_band_first_and_sheds_what_would_wait() -> None:
    jobs = columns([Job(0, 10, 1.0), Job(0.1, 5, 1.0), Job(0.2, 5, 1.0), Job(0.3, 1, 1.0)])
    classes = [DEFAULT_CLASS, DEFAULT_CLASS, QueueClass(9), QueueClass(-1, sheddable=True)]
    result = simulate(jobs._replace(classes=classes), Queueing(10, 5, 10))
    assert result.fates == (G, W, W, S)
    assert result.waits[2] == pytest.approx(0.8)  # granted at the release, with job 1
