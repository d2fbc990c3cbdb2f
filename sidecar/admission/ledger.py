"""The in-flight KV ledger: predicted KV bytes of requests that vLLM is serving right now.

A request reserves its predicted ``kv_bytes`` before it is forwarded and gives them back when
its response ends, however it ends. Reservations that do not fit wait in a ``FairQueue``
(``fair_queue``, classes from ``discipline``): higher bands first, fair by KV bytes between
tenants within a band; with
one band and one tenant (no headers), that is one FIFO queue. A sheddable request never
waits: it is granted at once or refused (``ShedError``).

Invariants, after every synchronous step:

* ``inflight_bytes`` is the sum of ``kv_bytes`` over granted, unreleased reservations, and
  ``inflight_requests`` is their count; a grant is counted the moment it is decided, before
  the waiting task resumes.
* With a budget, ``inflight_bytes <= total_bytes`` unless ``set_total_bytes`` shrank the budget
  under reservations already granted; shrinking never revokes them.
* Each grant is released exactly once: by ``Reservation.release()`` (idempotent), or inside
  ``acquire`` when the caller is cancelled or times out just as the grant lands.
* Grants follow the queue's order: a waiter is granted only once every waiter ahead of it
  has been granted or has left, so a large request at the head is never starved by small
  ones behind it. A new request is granted at once only when nobody waits.

A ``total_bytes`` of 0 means no budget: every reservation is granted at once but still counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Iterator

from sidecar.admission.discipline import DEFAULT_CLASS, QueueClass
from sidecar.admission.fair_queue import Entry, FairQueue
from sidecar.errors import LargerThanBudgetError, OverloadedError, QueueFullError, ShedError
from sidecar.units import format_bytes

_Waiter = Entry[asyncio.Future[None]]


class Reservation:
    """Granted KV bytes, held until ``release()``; ``waited_seconds`` is the queue wait."""

    __slots__ = ("_ledger", "_released", "kv_bytes", "waited_seconds")

    def __init__(self, ledger: KvLedger, kv_bytes: int, waited_seconds: float) -> None:
        self._ledger = ledger
        self._released = False
        self.kv_bytes = kv_bytes
        self.waited_seconds = waited_seconds

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Give the bytes back and wake waiters that now fit; later calls do nothing."""
        if not self._released:
            self._released = True
            self._ledger._release(self.kv_bytes)


class KvLedger:
    """Admission of KV bytes under ``total_bytes`` (0: unlimited, only counted)."""

    def __init__(
        self,
        total_bytes: int,
        *,
        max_queue_depth: int | None = None,
        max_tenant_queue_depth: int = 0,
        aging_seconds: float = 0.0,
    ) -> None:
        if total_bytes < 0:
            raise ValueError(f"total_bytes must be >= 0, got {total_bytes}")
        if max_queue_depth is not None and max_queue_depth < 0:
            raise ValueError(f"max_queue_depth must be >= 0 or None, got {max_queue_depth}")
        self._total_bytes = total_bytes
        self._max_queue_depth = max_queue_depth
        self._inflight_bytes = 0
        self._inflight_requests = 0
        self._waiters: FairQueue[asyncio.Future[None]] = FairQueue(
            max_tenant_depth=max_tenant_queue_depth, aging_seconds=aging_seconds
        )

    @property
    def total_bytes(self) -> int:
        return self._total_bytes

    @property
    def inflight_bytes(self) -> int:
        return self._inflight_bytes

    @property
    def inflight_requests(self) -> int:
        return self._inflight_requests

    @property
    def queue_depth(self) -> int:
        return len(self._waiters)

    def waiting_by_band(self) -> Iterator[tuple[int, int]]:
        """``(priority, waiters)`` of each band with waiters, highest first."""
        return self._waiters.waiting_by_band()

    def oldest_wait_by_band(self) -> Iterator[tuple[int, float]]:
        """``(priority, seconds)`` the oldest waiter of each band has waited so far."""
        now = _loop_time()
        return ((band, now - arrival) for band, arrival in self._waiters.oldest_by_band())

    @property
    def tenants_waiting(self) -> int:
        return self._waiters.tenants_waiting

    def set_total_bytes(self, total_bytes: int) -> None:
        """Change the budget at runtime; waiters that now fit are granted, none are revoked."""
        if total_bytes < 0:
            raise ValueError(f"total_bytes must be >= 0, got {total_bytes}")
        self._total_bytes = total_bytes
        self._wake()

    async def acquire(
        self, kv_bytes: int, timeout_seconds: float, queue_class: QueueClass = DEFAULT_CLASS
    ) -> Reservation:
        """Wait in the queue's order for ``kv_bytes``; raise ``OverloadedError`` when refused
        or late (``ShedError`` at once for a sheddable request that would wait).

        The caller owns the returned reservation and must ``release()`` it.
        """
        if kv_bytes < 0:
            raise ValueError(f"kv_bytes must be >= 0, got {kv_bytes}")
        retry_after_seconds = max(1, math.ceil(timeout_seconds))
        if self._exceeds_total(kv_bytes):
            raise self._too_large(kv_bytes)
        if not self._waiters and self._fits(kv_bytes):
            self._grant(kv_bytes)
            return Reservation(self, kv_bytes, 0.0)
        if queue_class.sheddable:
            waiting = f"{len(self._waiters)} waiting" if self._waiters else "nobody waiting"
            raise ShedError(
                f"{self._state(kv_bytes)} ({waiting}), and the request is sheddable "
                f"(priority {queue_class.priority}): refused at once rather than queued",
                retry_after_seconds=retry_after_seconds,
            )
        if self._max_queue_depth is not None and len(self._waiters) >= self._max_queue_depth:
            raise QueueFullError(
                f"{self._state(kv_bytes)}, and the queue is full "
                f"({len(self._waiters)} waiting); retry later",
                retry_after_seconds=retry_after_seconds,
            )
        if self._waiters.tenant_full(queue_class.priority, queue_class.tenant):
            raise QueueFullError(
                f"{self._state(kv_bytes)}, and this tenant already has the most waiting "
                "requests one tenant may have (SIDECAR_MAX_TENANT_QUEUE_DEPTH); retry later",
                retry_after_seconds=retry_after_seconds,
            )

        started = time.monotonic()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        waiter = self._waiters.push(
            future, kv_bytes, queue_class.priority, queue_class.tenant, loop.time()
        )
        self._wake()  # a higher band may be granted now, ahead of a head that does not fit
        try:
            async with asyncio.timeout(timeout_seconds):
                await future
        except TimeoutError:
            if not _granted(waiter):
                self._leave(waiter)
                raise OverloadedError(
                    f"{self._state(kv_bytes)} after waiting {timeout_seconds:g} s; retry later",
                    retry_after_seconds=retry_after_seconds,
                ) from None
            # The grant landed in the same loop iteration as the deadline: keep it.
        except BaseException:
            if _granted(waiter):
                self._release(kv_bytes)
            else:
                self._leave(waiter)
            raise
        return Reservation(self, kv_bytes, time.monotonic() - started)

    @contextlib.asynccontextmanager
    async def reserve(self, kv_bytes: int, timeout_seconds: float) -> AsyncIterator[Reservation]:
        """``acquire`` for the length of an ``async with`` block, released however it ends."""
        reservation = await self.acquire(kv_bytes, timeout_seconds)
        try:
            yield reservation
        finally:
            reservation.release()

    def _fits(self, kv_bytes: int) -> bool:
        return self._total_bytes == 0 or self._inflight_bytes + kv_bytes <= self._total_bytes

    def _exceeds_total(self, kv_bytes: int) -> bool:
        return self._total_bytes != 0 and kv_bytes > self._total_bytes

    def _grant(self, kv_bytes: int) -> None:
        self._inflight_bytes += kv_bytes
        self._inflight_requests += 1

    def _release(self, kv_bytes: int) -> None:
        self._inflight_bytes -= kv_bytes
        self._inflight_requests -= 1
        self._wake()

    def _leave(self, waiter: _Waiter) -> None:
        """Drop a waiter that gave up; the ones behind it may now fit."""
        self._waiters.remove(waiter)  # a no-op when already dropped by _wake
        self._wake()

    def _wake(self) -> None:
        """Grant waiters from the head while they fit; stop at the first that does not."""
        waiters = self._waiters
        now = _loop_time()
        while (head := waiters.head(now)) is not None:
            if head.item.done():  # cancelled; its task will call _leave
                waiters.remove(head)
            elif self._exceeds_total(head.kv_bytes):  # the budget shrank under it
                waiters.remove(head)
                head.item.set_exception(self._too_large(head.kv_bytes))
            elif self._fits(head.kv_bytes):
                waiters.grant(head)
                self._grant(head.kv_bytes)
                head.item.set_result(None)
            else:
                return

    def _too_large(self, kv_bytes: int) -> LargerThanBudgetError:
        return LargerThanBudgetError(
            f"predicted KV cache {format_bytes(kv_bytes)} exceeds the whole in-flight budget "
            f"of {format_bytes(self._total_bytes)}; retrying will not help"
        )

    def _state(self, kv_bytes: int) -> str:
        return (
            f"predicted KV cache {format_bytes(kv_bytes)} does not fit the in-flight budget "
            f"of {format_bytes(self._total_bytes)} with {format_bytes(self._inflight_bytes)} "
            f"in flight"
        )


def _loop_time() -> float:
    """The event loop's clock, which ``asyncio.timeout`` also reads (the queue's arrivals
    and aging follow it); ``time.monotonic``, the default loop's own, outside a loop."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def _granted(waiter: _Waiter) -> bool:
    future = waiter.item
    return future.done() and not future.cancelled() and future.exception() is None
