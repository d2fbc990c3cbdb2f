"""admission.ledger: FIFO grants, exact release on every ending, and a random concurrent load
driven by a virtual clock (``tests.support.virtual_time``), so that it runs the same every time."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass

import pytest

from sidecar.admission.discipline import QueueClass
from sidecar.admission.ledger import KvLedger, Reservation
from sidecar.errors import LargerThanBudgetError, OverloadedError, QueueFullError, ShedError
from tests.support.virtual_time import run_in_virtual_time

MIB = 1024 * 1024
GIB = 1024 * MIB


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(5):
        await asyncio.sleep(0)


def waiting(awaitable: Awaitable[Reservation]) -> asyncio.Task[Reservation]:
    async def run() -> Reservation:
        return await awaitable

    return asyncio.create_task(run())


def assert_idle(ledger: KvLedger) -> None:
    assert (ledger.inflight_bytes, ledger.inflight_requests, ledger.queue_depth) == (0, 0, 0)


@pytest.mark.parametrize(
    ("held", "requested"),
    [(0, 10), (4, 6), (0, 0), (10, 0)],
    ids=["empty", "exact-fit", "zero-bytes", "zero-bytes-when-full"],
)
async def test_ledger_grants_immediately_when_under_budget(held: int, requested: int) -> None:
    ledger = KvLedger(10)
    if held:
        await ledger.acquire(held, timeout_seconds=1)
    reservation = await ledger.acquire(requested, timeout_seconds=1)
    assert reservation.kv_bytes == requested
    assert reservation.waited_seconds == 0.0
    assert ledger.inflight_bytes == held + requested
    assert ledger.inflight_requests == (2 if held else 1)
    assert ledger.queue_depth == 0


async def test_ledger_queues_when_full_and_grants_on_release() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(8, timeout_seconds=1)
    task = waiting(ledger.acquire(5, timeout_seconds=1))
    await settle()
    assert not task.done()
    assert (ledger.queue_depth, ledger.inflight_bytes) == (1, 8)
    holder.release()
    reservation = await task
    assert (ledger.queue_depth, ledger.inflight_bytes, ledger.inflight_requests) == (0, 5, 1)
    assert reservation.waited_seconds > 0
    reservation.release()
    assert_idle(ledger)


async def test_ledger_grants_in_fifo_order_when_a_large_waiter_is_at_the_head() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(6, timeout_seconds=1)
    big = waiting(ledger.acquire(9, timeout_seconds=1))
    await settle()
    small = [waiting(ledger.acquire(1, timeout_seconds=1)) for _ in range(3)]
    await settle()
    assert not big.done()
    assert not any(task.done() for task in small), "small requests overtook the big head waiter"
    assert ledger.queue_depth == 4

    holder.release()
    await settle()
    assert big.done()
    assert [task.done() for task in small] == [True, False, False]
    (await big).release()
    await settle()
    assert all(task.done() for task in small)
    for task in small:
        (await task).release()
    assert_idle(ledger)


async def test_ledger_grants_every_waiter_that_fits_on_one_release() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(10, timeout_seconds=1)
    tasks = [waiting(ledger.acquire(size, timeout_seconds=1)) for size in (3, 3, 3, 3)]
    await settle()
    holder.release()
    await settle()
    assert [task.done() for task in tasks] == [True, True, True, False]
    assert (ledger.inflight_bytes, ledger.queue_depth) == (9, 1)
    for task in tasks[:3]:
        (await task).release()
    (await tasks[3]).release()
    assert_idle(ledger)


async def test_ledger_raises_overloaded_with_a_readable_message_when_the_wait_times_out() -> None:
    ledger = KvLedger(GIB)
    holder = await ledger.acquire(768 * MIB, timeout_seconds=1)
    with pytest.raises(OverloadedError) as caught:
        await ledger.acquire(512 * MIB, timeout_seconds=0.01)
    error = caught.value
    assert error.status == 429
    assert error.retry_after_seconds == 1
    assert error.message == (
        "predicted KV cache 512 MiB does not fit the in-flight budget of 1 GiB "
        "with 768 MiB in flight after waiting 0.01 s; retry later (this replica is busy, not "
        "the service: another replica may serve it now)"
    )
    assert ledger.queue_depth == 0
    holder.release()
    assert_idle(ledger)


@pytest.mark.parametrize(
    ("total", "requested", "expected"),
    [
        (1000, 1001, "predicted KV cache 1,001 B exceeds the whole in-flight budget of 1,000 B"),
        (2048, 3072, "predicted KV cache 3 KiB exceeds the whole in-flight budget of 2 KiB"),
        (MIB, 3 * MIB // 2, "KV cache 1.5 MiB exceeds the whole in-flight budget of 1 MiB"),
        (24 * GIB, 30 * GIB, "KV cache 30 GiB exceeds the whole in-flight budget of 24 GiB"),
    ],
    ids=["bytes", "kib", "mib", "gib"],
)
async def test_ledger_refuses_immediately_when_one_request_exceeds_the_whole_budget(
    total: int, requested: int, expected: str
) -> None:
    ledger = KvLedger(total)
    with pytest.raises(LargerThanBudgetError, match=expected) as caught:
        await ledger.acquire(requested, timeout_seconds=30)
    assert caught.value.status == 413, "no wait can fit it: not a 429 to retry"
    assert "retrying will not help" in caught.value.message
    assert_idle(ledger)


async def test_ledger_counts_but_never_waits_when_total_is_zero() -> None:
    ledger = KvLedger(0)
    reservations = [await ledger.acquire(100 * GIB, timeout_seconds=0) for _ in range(3)]
    assert (ledger.inflight_bytes, ledger.inflight_requests, ledger.queue_depth) == (
        300 * GIB,
        3,
        0,
    )
    for reservation in reservations:
        reservation.release()
    assert_idle(ledger)


@pytest.mark.parametrize("ending", ["cancelled", "timed-out"], ids=["cancelled", "timed-out"])
async def test_ledger_wakes_the_waiters_behind_a_head_waiter_that_leaves(ending: str) -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(6, timeout_seconds=1)
    head = waiting(ledger.acquire(5, timeout_seconds=0.01 if ending == "timed-out" else 5))
    await settle()
    behind = waiting(ledger.acquire(4, timeout_seconds=5))
    await settle()
    assert ledger.queue_depth == 2
    if ending == "cancelled":
        head.cancel()
        with pytest.raises(asyncio.CancelledError):
            await head
    else:
        with pytest.raises(OverloadedError):
            await head
    reservation = await behind
    assert (ledger.inflight_bytes, ledger.inflight_requests, ledger.queue_depth) == (10, 2, 0)
    reservation.release()
    holder.release()
    assert_idle(ledger)


async def test_ledger_skips_a_cancelled_waiter_when_a_release_comes_before_its_cleanup() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(10, timeout_seconds=1)
    head = waiting(ledger.acquire(8, timeout_seconds=1))
    await settle()
    behind = waiting(ledger.acquire(4, timeout_seconds=1))
    await settle()
    head.cancel()
    holder.release()
    assert (ledger.inflight_bytes, ledger.queue_depth) == (4, 0)
    with pytest.raises(asyncio.CancelledError):
        await head
    (await behind).release()
    assert_idle(ledger)


async def test_ledger_keeps_the_ledger_exact_when_a_waiter_is_cancelled_as_its_grant_lands() -> (
    None
):
    ledger = KvLedger(10)
    holder = await ledger.acquire(10, timeout_seconds=1)
    task = waiting(ledger.acquire(5, timeout_seconds=1))
    await settle()
    holder.release()
    assert ledger.inflight_bytes == 5, "the grant is counted before the task resumes"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_idle(ledger)


async def test_ledger_keeps_a_grant_that_lands_in_the_same_iteration_as_the_deadline() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(10, timeout_seconds=1)
    task = waiting(ledger.acquire(5, timeout_seconds=0))
    await asyncio.sleep(0)
    holder.release()
    reservation = await task
    assert ledger.inflight_bytes == 5
    reservation.release()
    assert_idle(ledger)


async def test_ledger_releases_when_the_holder_is_cancelled_inside_async_with() -> None:
    ledger = KvLedger(10)
    entered = asyncio.Event()

    async def hold() -> None:
        async with ledger.reserve(7, timeout_seconds=1):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hold())
    await entered.wait()
    assert ledger.inflight_bytes == 7
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_idle(ledger)


async def test_ledger_releases_when_the_async_with_body_raises() -> None:
    ledger = KvLedger(10)
    seen: list[Reservation] = []

    async def fail_while_holding() -> None:
        async with ledger.reserve(7, timeout_seconds=1) as reservation:
            seen.append(reservation)
            assert ledger.inflight_bytes == 7
            raise RuntimeError("upstream broke")

    with pytest.raises(RuntimeError, match="upstream broke"):
        await fail_while_holding()
    assert seen[0].released
    assert_idle(ledger)


async def test_ledger_releases_when_the_async_with_body_ends_normally() -> None:
    ledger = KvLedger(10)
    async with ledger.reserve(7, timeout_seconds=1) as reservation:
        assert not reservation.released
    assert reservation.released
    assert_idle(ledger)


async def test_reservation_release_is_a_no_op_the_second_time() -> None:
    ledger = KvLedger(10)
    first = await ledger.acquire(4, timeout_seconds=1)
    second = await ledger.acquire(4, timeout_seconds=1)
    first.release()
    first.release()
    assert (ledger.inflight_bytes, ledger.inflight_requests) == (4, 1)
    second.release()
    assert_idle(ledger)


@pytest.mark.parametrize(
    ("new_total", "granted"),
    [(20, [True, True, False]), (30, [True, True, True]), (0, [True, True, True])],
    ids=["grow-partly", "grow-fully", "unlimited"],
)
async def test_ledger_set_total_bytes_wakes_waiters_that_now_fit(
    new_total: int, granted: list[bool]
) -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(10, timeout_seconds=1)
    tasks = [waiting(ledger.acquire(size, timeout_seconds=1)) for size in (6, 4, 3)]
    await settle()
    ledger.set_total_bytes(new_total)
    await settle()
    assert ledger.total_bytes == new_total
    assert [task.done() for task in tasks] == granted
    holder.release()
    for task in tasks:
        (await task).release()
    assert_idle(ledger)


async def test_ledger_set_total_bytes_shrinking_refuses_waiters_larger_than_the_new_total() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(8, timeout_seconds=1)
    too_big = waiting(ledger.acquire(6, timeout_seconds=5))
    small = waiting(ledger.acquire(2, timeout_seconds=5))
    await settle()
    ledger.set_total_bytes(5)
    assert ledger.inflight_bytes == 8, "granted reservations are never revoked"
    with pytest.raises(LargerThanBudgetError, match="exceeds the whole in-flight budget of 5 B"):
        await too_big
    assert ledger.queue_depth == 1
    holder.release()
    (await small).release()
    assert_idle(ledger)


@pytest.mark.parametrize(
    ("max_queue_depth", "timeout_seconds", "retry_after_seconds"),
    [(0, 0.01, 1), (2, 2.5, 3), (1, 30, 30)],
    ids=["no-queue", "two-deep", "one-deep"],
)
async def test_ledger_refuses_immediately_when_the_queue_is_full(
    max_queue_depth: int, timeout_seconds: float, retry_after_seconds: int
) -> None:
    ledger = KvLedger(10, max_queue_depth=max_queue_depth)
    holder = await ledger.acquire(10, timeout_seconds=1)
    queued = [waiting(ledger.acquire(1, timeout_seconds=5)) for _ in range(max_queue_depth)]
    await settle()
    with pytest.raises(QueueFullError, match=r"the queue is full \(\d+ waiting\)") as caught:
        await ledger.acquire(1, timeout_seconds=timeout_seconds)
    assert caught.value.retry_after_seconds == retry_after_seconds
    assert ledger.queue_depth == max_queue_depth
    holder.release()
    for task in queued:
        (await task).release()
    assert_idle(ledger)


@pytest.mark.parametrize(
    "arguments",
    [
        {"total_bytes": -1},
        {"total_bytes": 10, "max_queue_depth": -1},
    ],
    ids=["negative-total", "negative-queue-depth"],
)
def test_ledger_rejects_negative_settings(arguments: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        KvLedger(**arguments)


async def test_ledger_rejects_negative_sizes() -> None:
    ledger = KvLedger(10)
    with pytest.raises(ValueError, match="kv_bytes must be >= 0"):
        await ledger.acquire(-1, timeout_seconds=1)
    with pytest.raises(ValueError, match="total_bytes must be >= 0"):
        ledger.set_total_bytes(-1)


# --- random concurrent load, on a virtual clock ------------------------------------------------


class BodyError(Exception):
    """Raised inside a held reservation by the random load."""


@dataclass
class LoadRun:
    """How each of the random clients ended, and what the ledger looked like meanwhile."""

    endings: list[str]  # per client: "granted", or the class name of what it raised
    cancelled_while: Counter[str]  # where cancellations landed: "starting", "queued", "holding"
    violations: list[str]
    held_at_the_end: dict[int, int]
    ledger: KvLedger


async def random_load(seed: int, max_queue_depth: int | None, clients: int = 400) -> LoadRun:
    """``clients`` tasks acquire, hold and release random sizes with random timeouts; some are
    cancelled at random moments, some while they may be queued, some while they hold a grant.
    Every choice, and so every interleaving on the virtual clock, comes from ``seed``."""
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    total = 1000
    ledger = KvLedger(total, max_queue_depth=max_queue_depth)
    held: dict[int, int] = {}
    stage: dict[int, str] = {}
    violations: list[str] = []

    def check() -> None:
        if not 0 <= ledger.inflight_bytes <= total:
            violations.append(f"inflight_bytes {ledger.inflight_bytes} outside 0..{total}")
        if sum(held.values()) > ledger.inflight_bytes:
            violations.append("held reservations exceed the ledger")
        if len(held) > ledger.inflight_requests:
            violations.append("held reservations outnumber the ledger")

    def cancel_within(seconds: float) -> None:
        loop.call_later(rng.uniform(0, seconds), asyncio.current_task().cancel)  # type: ignore[union-attr]

    async def client(number: int) -> None:
        stage[number] = "starting"
        await asyncio.sleep(rng.uniform(0, 0.02))
        size = rng.choices(
            [rng.randint(1, 300), rng.randint(0, 20), total, total + 1], weights=[16, 2, 1, 1]
        )[0]
        timeout_seconds = rng.uniform(0, 0.05)
        if rng.random() < 0.1:  # the client gives up while it may still be queued
            cancel_within(timeout_seconds)
        stage[number] = "queued"  # acquire suspends only while queued: a grant is immediate
        async with ledger.reserve(size, timeout_seconds=timeout_seconds):
            stage[number] = "holding"
            held[number] = size
            check()
            hold_seconds = rng.uniform(0, 0.002)
            if rng.random() < 0.1:  # the client leaves while vLLM serves it
                cancel_within(hold_seconds)
            try:
                await asyncio.sleep(hold_seconds)
                if rng.random() < 0.1:
                    raise BodyError
            finally:
                del held[number]
        stage[number] = "released"

    async def checker() -> None:  # after every turn of the loop (each costs one virtual tick)
        while True:
            check()
            await asyncio.sleep(0)

    watch = asyncio.create_task(checker())
    tasks = [asyncio.create_task(client(number)) for number in range(clients)]
    for task in tasks:
        if rng.random() < 0.2:
            loop.call_later(rng.uniform(0, 0.04), task.cancel)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    watch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await watch
    return LoadRun(
        endings=["granted" if result is None else type(result).__name__ for result in results],
        cancelled_while=Counter(
            stage[number]
            for number, result in enumerate(results)
            if isinstance(result, asyncio.CancelledError)
        ),
        violations=violations,
        held_at_the_end=held,
        ledger=ledger,
    )


LOADS = {  # id: (seed, max_queue_depth, whether waiters stay queued long enough to time out)
    "seed-1": (1, None, True),
    "seed-2": (2, None, True),
    "seed-3-queue-40": (3, 40, True),
    "seed-4-queue-5": (4, 5, False),  # the queue is nearly always full: refused at once instead
}


@pytest.mark.parametrize(("seed", "max_queue_depth", "queue_waits"), LOADS.values(), ids=LOADS)
def test_ledger_stays_exact_under_random_concurrent_load(
    seed: int, max_queue_depth: int | None, queue_waits: bool
) -> None:
    run = run_in_virtual_time(lambda: random_load(seed, max_queue_depth))

    assert run.violations == []
    assert run.held_at_the_end == {}
    assert_idle(run.ledger)
    # Every way a request can end happened, and nothing else: granted and released, released
    # by a raising body, refused at once for its size or a full queue, timed out in the queue,
    # cancelled before asking, while queued and while holding its grant.
    refusals = {"LargerThanBudgetError", "OverloadedError"}
    refusals |= {"QueueFullError"} if max_queue_depth is not None else set()
    allowed = {"granted", "BodyError", "CancelledError", *refusals}
    required = allowed if queue_waits else allowed - {"OverloadedError"}
    assert required <= set(run.endings) <= allowed, Counter(run.endings)
    stages = {"starting", "queued", "holding"}
    required_stages = stages if queue_waits else stages - {"queued"}
    assert required_stages <= set(run.cancelled_while) <= stages, run.cancelled_while
    # The clock is virtual: the same seed gives the same interleaving, whatever the machine.
    assert run_in_virtual_time(lambda: random_load(seed, max_queue_depth)).endings == run.endings


# --- Bands, tenants and shedding (admission.discipline) -------------------------------------


async def test_ledger_sheds_a_sheddable_request_at_once_and_grants_it_when_it_fits() -> None:
    ledger = KvLedger(10)
    batch = QueueClass(-1, sheddable=True)
    granted = await ledger.acquire(4, timeout_seconds=30, queue_class=batch)
    with pytest.raises(ShedError, match=r"sheddable \(priority -1\)") as caught:
        await ledger.acquire(7, timeout_seconds=30, queue_class=batch)
    assert caught.value.status == 429
    assert caught.value.retry_after_seconds == 30
    assert ledger.queue_depth == 0
    granted.release()
    assert_idle(ledger)


async def test_ledger_sheds_a_sheddable_request_that_fits_while_others_wait() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(8, timeout_seconds=1)
    queued = waiting(ledger.acquire(5, timeout_seconds=1))
    await settle()
    with pytest.raises(ShedError, match=r"1 waiting"):
        await ledger.acquire(1, timeout_seconds=1, queue_class=QueueClass(-3, sheddable=True))
    holder.release()
    (await queued).release()
    assert_idle(ledger)


async def test_ledger_grants_a_higher_band_ahead_of_an_older_lower_band() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(10, timeout_seconds=1)
    low = waiting(ledger.acquire(6, timeout_seconds=1))
    await settle()
    high = waiting(ledger.acquire(6, timeout_seconds=1, queue_class=QueueClass(10)))
    await settle()
    holder.release()
    await settle()
    assert high.done()
    assert not low.done()
    high.result().release()
    (await low).release()
    assert_idle(ledger)


async def test_ledger_grants_a_higher_band_at_once_when_it_fits_beside_a_blocked_head() -> None:
    ledger = KvLedger(10)
    holder = await ledger.acquire(6, timeout_seconds=1)
    low = waiting(ledger.acquire(6, timeout_seconds=1))
    await settle()
    high = await ledger.acquire(3, timeout_seconds=1, queue_class=QueueClass(10))
    assert not low.done()
    for reservation in (holder, high):
        reservation.release()
    (await low).release()
    assert_idle(ledger)


async def test_ledger_serves_a_light_tenant_ahead_of_a_heavy_tenants_backlog() -> None:
    ledger = KvLedger(10)
    heavy, light = QueueClass(tenant="heavy"), QueueClass(tenant="light")
    holder = await ledger.acquire(10, timeout_seconds=5, queue_class=heavy)
    backlog = [waiting(ledger.acquire(8, timeout_seconds=5, queue_class=heavy)) for _ in range(3)]
    await settle()
    small = waiting(ledger.acquire(2, timeout_seconds=5, queue_class=light))
    await settle()
    holder.release()
    await settle()
    # The first of the backlog (start tag 0) and the light one (start tag 0, later) fit.
    assert backlog[0].done()
    assert small.done()
    assert not backlog[1].done()
    for task in (backlog[0], small):
        task.result().release()
    for task in backlog[1:]:
        (await task).release()
    assert_idle(ledger)


async def test_ledger_refuses_a_tenant_over_its_queue_depth_but_not_others() -> None:
    ledger = KvLedger(10, max_tenant_queue_depth=1)
    holder = await ledger.acquire(10, timeout_seconds=1)
    first = waiting(ledger.acquire(1, timeout_seconds=1, queue_class=QueueClass(tenant="a")))
    await settle()
    with pytest.raises(QueueFullError, match="SIDECAR_MAX_TENANT_QUEUE_DEPTH"):
        await ledger.acquire(1, timeout_seconds=1, queue_class=QueueClass(tenant="a"))
    other = waiting(ledger.acquire(1, timeout_seconds=1, queue_class=QueueClass(tenant="b")))
    await settle()
    assert ledger.queue_depth == 2
    holder.release()
    for task in (first, other):
        (await task).release()
    assert_idle(ledger)
