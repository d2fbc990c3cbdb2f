"""The in-flight ledger: FIFO grants, exact release on every ending, and a randomized stress run."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable

import pytest

from sidecar.admission.ledger import KvLedger, Reservation
from sidecar.errors import LargerThanBudgetError, OverloadedError, QueueFullError

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


def assert_idle(budget: KvLedger) -> None:
    assert (budget.inflight_bytes, budget.inflight_requests, budget.queue_depth) == (0, 0, 0)


@pytest.mark.parametrize(
    ("held", "requested"),
    [(0, 10), (4, 6), (0, 0), (10, 0)],
    ids=["empty", "exact-fit", "zero-bytes", "zero-bytes-when-full"],
)
async def test_kv_budget_grants_immediately_when_under_budget(held: int, requested: int) -> None:
    budget = KvLedger(10)
    if held:
        await budget.acquire(held, timeout_seconds=1)
    reservation = await budget.acquire(requested, timeout_seconds=1)
    assert reservation.kv_bytes == requested
    assert reservation.waited_seconds == 0.0
    assert budget.inflight_bytes == held + requested
    assert budget.inflight_requests == (2 if held else 1)
    assert budget.queue_depth == 0


async def test_kv_budget_queues_when_full_and_grants_on_release() -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(8, timeout_seconds=1)
    task = waiting(budget.acquire(5, timeout_seconds=1))
    await settle()
    assert not task.done()
    assert (budget.queue_depth, budget.inflight_bytes) == (1, 8)
    holder.release()
    reservation = await task
    assert (budget.queue_depth, budget.inflight_bytes, budget.inflight_requests) == (0, 5, 1)
    assert reservation.waited_seconds > 0
    reservation.release()
    assert_idle(budget)


async def test_kv_budget_grants_in_fifo_order_when_a_large_waiter_is_at_the_head() -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(6, timeout_seconds=1)
    big = waiting(budget.acquire(9, timeout_seconds=1))
    await settle()
    small = [waiting(budget.acquire(1, timeout_seconds=1)) for _ in range(3)]
    await settle()
    assert not big.done()
    assert not any(task.done() for task in small), "small requests overtook the big head waiter"
    assert budget.queue_depth == 4

    holder.release()
    await settle()
    assert big.done()
    assert [task.done() for task in small] == [True, False, False]
    (await big).release()
    await settle()
    assert all(task.done() for task in small)
    for task in small:
        (await task).release()
    assert_idle(budget)


async def test_kv_budget_grants_every_waiter_that_fits_on_one_release() -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(10, timeout_seconds=1)
    tasks = [waiting(budget.acquire(size, timeout_seconds=1)) for size in (3, 3, 3, 3)]
    await settle()
    holder.release()
    await settle()
    assert [task.done() for task in tasks] == [True, True, True, False]
    assert (budget.inflight_bytes, budget.queue_depth) == (9, 1)
    for task in tasks[:3]:
        (await task).release()
    (await tasks[3]).release()
    assert_idle(budget)


async def test_kv_budget_raises_overloaded_with_a_readable_message_when_the_wait_times_out() -> (
    None
):
    budget = KvLedger(GIB)
    holder = await budget.acquire(768 * MIB, timeout_seconds=1)
    with pytest.raises(OverloadedError) as caught:
        await budget.acquire(512 * MIB, timeout_seconds=0.01)
    error = caught.value
    assert error.status == 429
    assert error.retry_after_seconds == 1
    assert error.message == (
        "predicted KV cache 512 MiB does not fit the in-flight budget of 1 GiB "
        "with 768 MiB in flight after waiting 0.01 s; retry later"
    )
    assert budget.queue_depth == 0
    holder.release()
    assert_idle(budget)


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
async def test_kv_budget_refuses_immediately_when_one_request_exceeds_the_whole_budget(
    total: int, requested: int, expected: str
) -> None:
    budget = KvLedger(total)
    with pytest.raises(LargerThanBudgetError, match=expected) as caught:
        await budget.acquire(requested, timeout_seconds=30)
    assert caught.value.retry_after_seconds == 30
    assert_idle(budget)


async def test_kv_budget_counts_but_never_waits_when_total_is_zero() -> None:
    budget = KvLedger(0)
    reservations = [await budget.acquire(100 * GIB, timeout_seconds=0) for _ in range(3)]
    assert (budget.inflight_bytes, budget.inflight_requests, budget.queue_depth) == (
        300 * GIB,
        3,
        0,
    )
    for reservation in reservations:
        reservation.release()
    assert_idle(budget)


@pytest.mark.parametrize("ending", ["cancelled", "timed-out"], ids=["cancelled", "timed-out"])
async def test_kv_budget_wakes_the_waiters_behind_a_head_waiter_that_leaves(ending: str) -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(6, timeout_seconds=1)
    head = waiting(budget.acquire(5, timeout_seconds=0.01 if ending == "timed-out" else 5))
    await settle()
    behind = waiting(budget.acquire(4, timeout_seconds=5))
    await settle()
    assert budget.queue_depth == 2
    if ending == "cancelled":
        head.cancel()
        with pytest.raises(asyncio.CancelledError):
            await head
    else:
        with pytest.raises(OverloadedError):
            await head
    reservation = await behind
    assert (budget.inflight_bytes, budget.inflight_requests, budget.queue_depth) == (10, 2, 0)
    reservation.release()
    holder.release()
    assert_idle(budget)


async def test_kv_budget_skips_a_cancelled_waiter_when_a_release_comes_before_its_cleanup() -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(10, timeout_seconds=1)
    head = waiting(budget.acquire(8, timeout_seconds=1))
    await settle()
    behind = waiting(budget.acquire(4, timeout_seconds=1))
    await settle()
    head.cancel()
    holder.release()
    assert (budget.inflight_bytes, budget.queue_depth) == (4, 0)
    with pytest.raises(asyncio.CancelledError):
        await head
    (await behind).release()
    assert_idle(budget)


async def test_kv_budget_keeps_the_ledger_exact_when_a_waiter_is_cancelled_as_its_grant_lands() -> (
    None
):
    budget = KvLedger(10)
    holder = await budget.acquire(10, timeout_seconds=1)
    task = waiting(budget.acquire(5, timeout_seconds=1))
    await settle()
    holder.release()
    assert budget.inflight_bytes == 5, "the grant is counted before the task resumes"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_idle(budget)


async def test_kv_budget_keeps_a_grant_that_lands_in_the_same_iteration_as_the_deadline() -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(10, timeout_seconds=1)
    task = waiting(budget.acquire(5, timeout_seconds=0))
    await asyncio.sleep(0)
    holder.release()
    reservation = await task
    assert budget.inflight_bytes == 5
    reservation.release()
    assert_idle(budget)


async def test_kv_budget_releases_when_the_holder_is_cancelled_inside_async_with() -> None:
    budget = KvLedger(10)
    entered = asyncio.Event()

    async def hold() -> None:
        async with budget.reserve(7, timeout_seconds=1):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hold())
    await entered.wait()
    assert budget.inflight_bytes == 7
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_idle(budget)


async def test_kv_budget_releases_when_the_async_with_body_raises() -> None:
    budget = KvLedger(10)
    seen: list[Reservation] = []

    async def fail_while_holding() -> None:
        async with budget.reserve(7, timeout_seconds=1) as reservation:
            seen.append(reservation)
            assert budget.inflight_bytes == 7
            raise RuntimeError("upstream broke")

    with pytest.raises(RuntimeError, match="upstream broke"):
        await fail_while_holding()
    assert seen[0].released
    assert_idle(budget)


async def test_kv_budget_releases_when_the_async_with_body_ends_normally() -> None:
    budget = KvLedger(10)
    async with budget.reserve(7, timeout_seconds=1) as reservation:
        assert not reservation.released
    assert reservation.released
    assert_idle(budget)


async def test_reservation_release_is_a_no_op_the_second_time() -> None:
    budget = KvLedger(10)
    first = await budget.acquire(4, timeout_seconds=1)
    second = await budget.acquire(4, timeout_seconds=1)
    first.release()
    first.release()
    assert (budget.inflight_bytes, budget.inflight_requests) == (4, 1)
    second.release()
    assert_idle(budget)


@pytest.mark.parametrize(
    ("new_total", "granted"),
    [(20, [True, True, False]), (30, [True, True, True]), (0, [True, True, True])],
    ids=["grow-partly", "grow-fully", "unlimited"],
)
async def test_kv_budget_set_total_bytes_wakes_waiters_that_now_fit(
    new_total: int, granted: list[bool]
) -> None:
    budget = KvLedger(10)
    holder = await budget.acquire(10, timeout_seconds=1)
    tasks = [waiting(budget.acquire(size, timeout_seconds=1)) for size in (6, 4, 3)]
    await settle()
    budget.set_total_bytes(new_total)
    await settle()
    assert budget.total_bytes == new_total
    assert [task.done() for task in tasks] == granted
    holder.release()
    for task in tasks:
        (await task).release()
    assert_idle(budget)


async def test_kv_budget_set_total_bytes_shrinking_refuses_waiters_larger_than_the_new_total() -> (
    None
):
    budget = KvLedger(10)
    holder = await budget.acquire(8, timeout_seconds=1)
    too_big = waiting(budget.acquire(6, timeout_seconds=5))
    small = waiting(budget.acquire(2, timeout_seconds=5))
    await settle()
    budget.set_total_bytes(5)
    assert budget.inflight_bytes == 8, "granted reservations are never revoked"
    with pytest.raises(OverloadedError, match="exceeds the whole in-flight budget of 5 B"):
        await too_big
    assert budget.queue_depth == 1
    holder.release()
    (await small).release()
    assert_idle(budget)


@pytest.mark.parametrize(
    ("max_queue_depth", "timeout_seconds", "retry_after_seconds"),
    [(0, 0.01, 1), (2, 2.5, 3), (1, 30, 30)],
    ids=["no-queue", "two-deep", "one-deep"],
)
async def test_kv_budget_refuses_immediately_when_the_queue_is_full(
    max_queue_depth: int, timeout_seconds: float, retry_after_seconds: int
) -> None:
    budget = KvLedger(10, max_queue_depth=max_queue_depth)
    holder = await budget.acquire(10, timeout_seconds=1)
    queued = [waiting(budget.acquire(1, timeout_seconds=5)) for _ in range(max_queue_depth)]
    await settle()
    with pytest.raises(QueueFullError, match=r"the queue is full \(\d+ waiting\)") as caught:
        await budget.acquire(1, timeout_seconds=timeout_seconds)
    assert caught.value.retry_after_seconds == retry_after_seconds
    assert budget.queue_depth == max_queue_depth
    holder.release()
    for task in queued:
        (await task).release()
    assert_idle(budget)


@pytest.mark.parametrize(
    "arguments",
    [
        {"total_bytes": -1},
        {"total_bytes": 10, "max_queue_depth": -1},
    ],
    ids=["negative-total", "negative-queue-depth"],
)
def test_kv_budget_rejects_negative_settings(arguments: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        KvLedger(**arguments)


async def test_kv_budget_rejects_negative_sizes() -> None:
    budget = KvLedger(10)
    with pytest.raises(ValueError, match="kv_bytes must be >= 0"):
        await budget.acquire(-1, timeout_seconds=1)
    with pytest.raises(ValueError, match="total_bytes must be >= 0"):
        budget.set_total_bytes(-1)


class BodyError(Exception):
    """Raised inside a held reservation by the stress test."""


@pytest.mark.parametrize(
    ("seed", "max_queue_depth"),
    [(1, None), (2, None), (3, 40), (4, 5)],
    ids=["seed-1", "seed-2", "seed-3-queue-40", "seed-4-queue-5"],
)
async def test_kv_budget_stays_exact_under_random_concurrent_load(
    seed: int, max_queue_depth: int | None
) -> None:
    rng = random.Random(seed)
    total = 1000
    budget = KvLedger(total, max_queue_depth=max_queue_depth)
    held: dict[int, int] = {}
    violations: list[str] = []

    def check() -> None:
        if not 0 <= budget.inflight_bytes <= total:
            violations.append(f"inflight_bytes {budget.inflight_bytes} outside 0..{total}")
        if sum(held.values()) > budget.inflight_bytes:
            violations.append("held reservations exceed the ledger")
        if len(held) > budget.inflight_requests:
            violations.append("held reservations outnumber the ledger")

    async def client(number: int) -> None:
        await asyncio.sleep(rng.uniform(0, 0.02))
        size = rng.choices(
            [rng.randint(1, 300), rng.randint(0, 20), total, total + 1], weights=[16, 2, 1, 1]
        )[0]
        async with budget.reserve(size, timeout_seconds=rng.uniform(0, 0.05)):
            held[number] = size
            check()
            try:
                await asyncio.sleep(rng.uniform(0, 0.002))
                if rng.random() < 0.1:
                    raise BodyError
            finally:
                del held[number]

    async def checker() -> None:
        while True:
            check()
            await asyncio.sleep(0)

    watch = asyncio.create_task(checker())
    loop = asyncio.get_running_loop()
    tasks = [asyncio.create_task(client(number)) for number in range(400)]
    for task in tasks:
        if rng.random() < 0.2:
            loop.call_later(rng.uniform(0, 0.04), task.cancel)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    watch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await watch

    outcomes = {
        "OverloadedError" if isinstance(result, OverloadedError) else type(result).__name__
        for result in results
    }
    assert outcomes <= {"NoneType", "OverloadedError", "CancelledError", "BodyError"}
    assert {"NoneType", "OverloadedError", "CancelledError", "BodyError"} <= outcomes, outcomes
    assert violations == []
    assert held == {}
    assert_idle(budget)
