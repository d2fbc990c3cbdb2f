"""The in-flight KV ledger over recorded arrivals and service times, as ``KvLedger`` behaves.

Each job arrives at its recorded time, asks for its KV bytes and, once granted, holds them
for its service time (the time vLLM held it when recorded). As in the live ledger:

* a job is granted at once when nobody waits and it fits; otherwise it joins one FIFO
  queue, unless ``max_queue_depth`` jobs already wait (``queue_full``);
* releases and departures grant waiters from the head while the head fits, never past it;
* a waiter leaves after ``timeout_seconds`` (``queue_timeout``), and those behind it may
  then be granted;
* at equal times a release comes before a timeout, and both before an arrival.

With queue classes (bands, tenants, sheddable: ``admission.discipline``), the waiters are
ordered by the same ``FairQueue`` the live ledger uses: a sheddable job that would wait is
shed; a job whose tenant has ``max_tenant_depth`` waiting in its band is refused
(``queue_full``); each arrival that queues and each release grant from the queue's head
while it fits; the oldest waiter (whatever its band) is the next to time out. Without
classes every job is one tenant in one band, and the FIFO loop below is that same order.

A job larger than the whole budget never gets here: ``decide`` rejects it first. Shadow mode
counts without a budget, and marks the admitted jobs that ``decide`` would have made wait.
Not simulated: the saturation gate (it follows vLLM's own gauges), and any change in how
long vLLM takes when the load differs from the recording's.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, cast

from sidecar.admission.discipline import DEFAULT_CLASS, QueueClass
from sidecar.admission.fair_queue import FairQueue


class Fate(Enum):
    """What the ledger did with a job."""

    GRANTED = "granted"  # at once
    WAITED = "waited"  # queued, then granted
    QUEUE_TIMEOUT = "queue_timeout"
    QUEUE_FULL = "queue_full"
    SHED = "shed"  # sheddable, and it would have waited


class Job(NamedTuple):
    """One forwarded request: arrival (seconds), KV bytes, service time (seconds)."""

    arrival: float
    kv_bytes: int
    held_seconds: float


class Jobs(NamedTuple):
    """Requests in arrival order, as columns (a replay has them as columns: no million
    tuples to make). A request with no KV bytes (None) was not forwarded: it passes by."""

    arrivals: Sequence[float]
    kv_bytes: Sequence[int | None]
    held_seconds: Sequence[float]
    classes: Sequence[QueueClass] | None = None  # None: every job in one band, one tenant


@dataclass(frozen=True, slots=True)
class Queueing:
    """The in-flight budget and its queue: ``SIDECAR_KV_BUDGET_BYTES`` (0: off), the queue
    timeout and depth."""

    budget_bytes: int
    timeout_seconds: float
    max_depth: int
    shadow: bool = False
    max_tenant_depth: int = 0  # SIDECAR_MAX_TENANT_QUEUE_DEPTH; 0: none of its own
    aging_seconds: float = 0.0  # SIDECAR_PRIORITY_AGING_SECONDS


@dataclass(frozen=True, slots=True)
class Simulated:
    """Per job: its fate and its wait; and the peak in flight."""

    fates: tuple[Fate, ...]
    waits: tuple[float, ...]
    would_wait: tuple[bool, ...]  # shadow mode: decide() would have answered wait
    peak_kv_bytes: int
    peak_requests: int


def simulate(jobs: Jobs, queueing: Queueing) -> Simulated:
    """Run the ledger over ``jobs``, which are in arrival order; a request that passes by
    keeps ``GRANTED`` and no wait."""
    shadow, limit = queueing.shadow, queueing.budget_bytes
    if jobs.classes is not None and not shadow and limit:
        return _simulate_classes(jobs, queueing, jobs.classes)
    budget = 0 if shadow else limit
    timeout, max_depth = queueing.timeout_seconds, queueing.max_depth
    arrivals, kvs, helds, _ = jobs
    # Enum members read once: a class attribute per waiter adds up over a busy queue.
    waited, timed_out, refused = Fate.WAITED, Fate.QUEUE_TIMEOUT, Fate.QUEUE_FULL
    fates = [Fate.GRANTED] * len(arrivals)
    waits = [0.0] * len(arrivals)
    would_wait = [False] * len(arrivals)
    releases: list[tuple[float, int]] = []  # (time, kv bytes)
    waiters: deque[int] = deque()
    inflight = requests = peak = peak_requests = 0
    push, pop = heapq.heappush, heapq.heappop

    def grant(job: int, now: float) -> None:
        nonlocal inflight, requests, peak, peak_requests
        kv_bytes, held = cast(int, kvs[job]), helds[job]
        inflight += kv_bytes
        requests += 1
        peak, peak_requests = max(peak, inflight), max(peak_requests, requests)
        push(releases, (now + held, kv_bytes))

    def advance(until: float) -> None:
        """Releases and timeouts up to ``until``, each granting the waiters it can."""
        nonlocal inflight, requests
        while True:
            release = releases[0][0] if releases else math.inf
            deadline = arrivals[waiters[0]] + timeout if waiters else math.inf
            now = min(release, deadline)
            if now > until or now == math.inf:
                return
            if release <= deadline:
                inflight, requests = inflight - pop(releases)[1], requests - 1
            else:
                job = waiters.popleft()
                fates[job], waits[job] = timed_out, timeout
            while waiters and not (budget and inflight + cast(int, kvs[waiters[0]]) > budget):
                job = waiters.popleft()
                fates[job], waits[job] = waited, now - arrivals[job]
                grant(job, now)

    # The common case is written out inline (nobody waiting: releases due, then a grant),
    # the queue's own work goes through ``advance``: a million jobs take about 1 s.
    for number, (arrival, kv_bytes, held) in enumerate(zip(arrivals, kvs, helds, strict=True)):
        if kv_bytes is None:
            continue
        if waiters:
            advance(arrival)
        else:
            while releases and releases[0][0] <= arrival:
                inflight, requests = inflight - pop(releases)[1], requests - 1
        if shadow:
            would_wait[number] = bool(limit) and inflight + kv_bytes > limit
        elif waiters or (budget and inflight + kv_bytes > budget):
            if len(waiters) >= max_depth:
                fates[number] = refused
            else:
                waiters.append(number)
                if timeout <= 0:
                    advance(arrival)  # asyncio.timeout(0): gone before anything else happens
            continue
        inflight += kv_bytes
        requests += 1
        if inflight > peak:
            peak = inflight
        if requests > peak_requests:
            peak_requests = requests
        push(releases, (arrival + held, kv_bytes))
    advance(math.inf)
    return Simulated(tuple(fates), tuple(waits), tuple(would_wait), peak, peak_requests)


def _simulate_classes(jobs: Jobs, queueing: Queueing, classes: Sequence[QueueClass]) -> Simulated:
    """``simulate`` with bands and tenants: the live ledger's steps, event by event."""
    budget, timeout, max_depth = queueing.budget_bytes, queueing.timeout_seconds, queueing.max_depth
    arrivals, kvs, helds, _ = jobs
    fates = [Fate.GRANTED] * len(arrivals)
    waits = [0.0] * len(arrivals)
    releases: list[tuple[float, int]] = []
    queue: FairQueue[int] = FairQueue(
        max_tenant_depth=queueing.max_tenant_depth, aging_seconds=queueing.aging_seconds
    )
    inflight = requests = peak = peak_requests = 0

    def grant(job: int, now: float) -> None:
        nonlocal inflight, requests, peak, peak_requests
        kv_bytes = cast(int, kvs[job])
        inflight += kv_bytes
        requests += 1
        peak, peak_requests = max(peak, inflight), max(peak_requests, requests)
        heapq.heappush(releases, (now + helds[job], kv_bytes))

    def wake(now: float) -> None:
        while (head := queue.head(now)) is not None and inflight + head.kv_bytes <= budget:
            queue.grant(head)
            fates[head.item], waits[head.item] = Fate.WAITED, now - arrivals[head.item]
            grant(head.item, now)

    def advance(until: float) -> None:
        nonlocal inflight, requests
        while True:
            release = releases[0][0] if releases else math.inf
            oldest = queue.oldest()
            deadline = oldest.arrival + timeout if oldest is not None else math.inf
            now = min(release, deadline)
            if now > until or now == math.inf:
                return
            if release <= deadline or oldest is None:
                inflight, requests = inflight - heapq.heappop(releases)[1], requests - 1
            else:
                queue.remove(oldest)
                fates[oldest.item], waits[oldest.item] = Fate.QUEUE_TIMEOUT, timeout
            wake(now)

    for number, (arrival, kv_bytes, queue_class) in enumerate(
        zip(arrivals, kvs, classes, strict=True)
    ):
        if kv_bytes is None:
            continue
        advance(arrival)
        if not queue and inflight + kv_bytes <= budget:
            grant(number, arrival)
        elif queue_class.sheddable:
            fates[number] = Fate.SHED
        elif len(queue) >= max_depth or queue.tenant_full(queue_class.priority, queue_class.tenant):
            fates[number] = Fate.QUEUE_FULL
        else:
            queue.push(number, kv_bytes, queue_class.priority, queue_class.tenant, arrival)
            wake(arrival)
            if timeout <= 0:
                advance(arrival)
    advance(math.inf)
    return Simulated(tuple(fates), tuple(waits), (False,) * len(arrivals), peak, peak_requests)


def one_class(classes: Sequence[QueueClass]) -> bool:
    """Whether every job queues as one tenant in one band (the FIFO loop then applies)."""
    return all(queue_class is DEFAULT_CLASS for queue_class in classes)
