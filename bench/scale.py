"""Scale: 10,000 streams open through one sidecar, and 10,000 requests waiting for KV budget.

    .venv/bin/python bench/scale.py [--quick] [--streams 10000] [--waiters 10000]

(a) **Open streams.** A stand-in vLLM and a sidecar (``bench/loop_lag.py``'s, uvloop, JSON
    logs to /dev/null) each run in a child process; this process is the client, on
    127.0.0.1, holding ``--streams`` SSE chat streams open at once over as many connections
    (aiohttp, no connection limit). The stand-in holds every stream after its first event
    (``StandinServer.hold_streams``) until all are open, then lets them finish. Measured: the
    sidecar's RSS idle and with all open (``/proc``), so its memory per open stream (its
    client and upstream connections, the handler, the reservation, the record); ``/healthz``
    round trips on its metrics port (same process, same event loop) sampled every 2 ms while
    idle, while the streams open and while all are open; and that every stream then ends
    with ``[DONE]``, none with an error, and the sidecar's in-flight gauge is back at 0.

(b) **Waiting for KV budget**, in this process: the ``KvLedger`` is the unit that queues,
    so its own cost per waiter can be set beside a baseline's (a whole sidecar's is (c)).
    One reservation holds the budget; ``--waiters`` tasks then call ``acquire`` and wait.
    Measured per waiter: memory (``tracemalloc``, the task, its coroutine and the ledger's
    entry), the cost to enqueue (create the task and run it up to its wait), and the cost
    to grant (the budget grows to fit all; ``_wake`` grants every waiter in one call). Each
    with one tenant in one band (the FIFO order) and with 1,000 tenants in three bands (the
    fair queue of ``admission/fair_queue.py``), against the least a queue of waiters can be
    measured in the same run: tasks each waiting on a future put in an ``asyncio.Queue``,
    granted by ``get_nowait`` and ``set_result``. Then every waiter is woken and releases:
    the ledger must end with nothing in flight and nobody waiting, and the memory must come
    back.

(c) **Waiting in a sidecar**: the same as a whole process. A second sidecar before the same
    stand-in has a budget that fits one stream (as (a)'s sidecar priced it) and a queue
    that takes every waiter; one held stream takes the budget, then ``--waiters`` streams
    arrive (256 at a time, each batch once the sidecar counts it waiting) and wait in its
    FIFO queue. Measured: its RSS per waiting request (the connection, the handler, the
    priced body and the ledger's waiter), ``/healthz`` with all waiting, and, once the
    held stream is let go, that every waiter is granted in turn and ends with ``[DONE]``,
    leaving the queue and the in-flight gauge at 0.

The client side needs a descriptor per stream and the sidecar two (its client's and
vLLM's), so this process raises its soft ``RLIMIT_NOFILE`` to the hard limit (and the hard
limit too where it may) before starting the servers, which inherit it; with too few it says
so and opens as many streams as fit.

Targets (ratios or bounds that hold on a loaded 2-core VM, with room above what it measures): every
stream and every waiter completes without error; the sidecar's RSS per open stream at most
``TARGET_RSS_PER_STREAM_KIB`` and per waiting request at most ``TARGET_RSS_PER_WAITER_KIB``;
``/healthz`` p99 while all are open, or all wait, at most ``TARGET_OPEN_LAG_P99_MS`` above
the p99 before; per waiter, for both queues, memory at most
``TARGET_WAITER_MEMORY_RATIO`` times the baseline's, enqueue at most ``TARGET_ENQUEUE_RATIO``
and grant at most ``TARGET_GRANT_RATIO`` times (a scan over the waiters would be thousands of
times); nothing left in the ledger and under a byte per waiter left in memory once it is
dropped. While the streams open, the lag is printed, not held to a target: the sidecar's
heap grows by every stream's objects, and Python's full collections over it stall the loop
for as long as they take. Prints markdown; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import multiprocessing
import os
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import aiohttp
import orjson
import uvloop
from fair_queue import BANDS, TENANTS  # bench/fair_queue.py: this script's directory is on sys.path
from loop_lag import HOST, QWEN, sample_healthz, start  # bench/loop_lag.py, likewise

from sidecar.admission.discipline import QueueClass
from sidecar.admission.ledger import KvLedger
from sidecar.observe.labels import PREFIX
from sidecar.standin import StandinConfig, run_standin

STREAMS = 10_000
WAITERS = 10_000
OPENING_AT_ONCE = 256  # connections being opened at a time: below the listen backlog
DESCRIPTORS_PER_STREAM_IN_SIDECAR = 2  # the client's connection and vLLM's
DESCRIPTOR_MARGIN = 256  # listeners, pipes, the interpreter's own files
LAG_SECONDS = 1.5
KV_BYTES_HEADER = "x-vlm-sidecar-kv-bytes"
RUNS = 3
MIB = 1 << 20
TARGET_RSS_PER_STREAM_KIB = 64.0
TARGET_OPEN_LAG_P99_MS = 10.0
TARGET_RSS_PER_WAITER_KIB = 64.0
TARGET_WAITER_MEMORY_RATIO = 4.0
TARGET_ENQUEUE_RATIO = 8.0
TARGET_GRANT_RATIO = 25.0


# --- descriptors -------------------------------------------------------------------------------


def raise_descriptor_limit(wanted: int) -> tuple[int, str]:
    """Raise this process's soft ``RLIMIT_NOFILE`` (children inherit it) to the hard limit,
    or to ``wanted`` past it where the process may raise the hard limit too; returns the
    limit now in force and a note when it is short of ``wanted``."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
            return wanted, ""
        except (ValueError, OSError):
            pass  # only a privileged process may raise the hard limit
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limit = wanted if hard == resource.RLIM_INFINITY else hard
    note = (
        "" if limit >= wanted else f"RLIMIT_NOFILE hard limit {hard} is under the {wanted} needed"
    )
    return limit, note


def streams_that_fit(streams: int, descriptor_limit: int) -> int:
    per_process = (descriptor_limit - DESCRIPTOR_MARGIN) // DESCRIPTORS_PER_STREAM_IN_SIDECAR
    return max(1, min(streams, per_process))


# --- (a) open streams --------------------------------------------------------------------------


def serve_holding_standin(conn: Connection) -> None:
    """Child process: a stand-in that holds its streams until told ``release``."""
    uvloop.run(_serve_holding_standin(conn))


async def _serve_holding_standin(conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    config = StandinConfig(served_model_name=QWEN, record_requests=False, load_images=False)
    async with run_standin(config, host=HOST) as standin:
        standin.hold_streams()
        conn.send(standin.port)
        while (message := await loop.run_in_executor(None, conn.recv)) in ("hold", "release"):
            (standin.hold_streams if message == "hold" else standin.release_streams)()
            conn.send(message)


def start_holding_standin() -> tuple[multiprocessing.process.BaseProcess, Connection]:
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=serve_holding_standin, args=(theirs,), daemon=True)
    child.start()
    if not ours.poll(60):
        raise RuntimeError("the stand-in did not start")
    return child, ours


def serve_lag_sampler(conn: Connection, url: str) -> None:
    """Child process: sample ``url`` from each ``start`` to the next ``stop``, send the round
    trips back; apart from the client so its own work on 10,000 sockets is not counted."""
    uvloop.run(_serve_lag_sampler(conn, url))


async def _serve_lag_sampler(conn: Connection, url: str) -> None:
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session:
        conn.send("ready")
        while await loop.run_in_executor(None, conn.recv) == "start":
            conn.send(await sample_until_told(session, url, conn))


async def sample_until_told(
    session: aiohttp.ClientSession, url: str, conn: Connection
) -> list[float]:
    stop = asyncio.Event()
    told = asyncio.get_running_loop().run_in_executor(None, conn.recv)
    told.add_done_callback(lambda _: stop.set())
    return await sample_healthz(session, url, stop)


class LagSampler:
    """``/healthz`` round trips in ms, sampled every 2 ms by a process of their own."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=serve_lag_sampler, args=(theirs, url), daemon=True)
        self.process.start()
        if not self.conn.poll(60):
            raise RuntimeError("the /healthz sampler did not start")
        self.conn.recv()

    async def during(self, work: Awaitable[object]) -> list[float]:
        self.conn.send("start")
        await work
        self.conn.send("stop")
        samples: list[float] = await asyncio.get_running_loop().run_in_executor(
            None, self.conn.recv
        )
        return samples

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send("quit")
        self.process.join(10)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@dataclass
class StreamFigures:
    streams: int
    rss_idle: int
    rss_open: int
    rss_after: int
    open_seconds: float
    drain_seconds: float
    lag_idle: list[float]
    lag_opening: list[float]
    lag_open: list[float]
    completed: int
    errors: list[str]
    inflight_after: float
    kv_bytes_per_stream: int


class Streams:
    """``count`` SSE streams, each counted open at its first event and done at ``[DONE]``."""

    def __init__(
        self, session: aiohttp.ClientSession, url: str, count: int, paced: bool = True
    ) -> None:
        """``paced``: at most ``OPENING_AT_ONCE`` waiting for their answer's headers at a time
        (requests queued by the sidecar get none until granted: the caller paces those)."""
        self.session, self.url, self.count = session, url, count
        self.opened = 0
        self.all_open = asyncio.Event()
        self.errors: list[str] = []
        self.completed = 0
        self.kv_bytes = 0  # the sidecar's prediction for one stream, from its answer
        self._opening = asyncio.Semaphore(OPENING_AT_ONCE if paced else count)
        self._body = orjson.dumps(
            {
                "model": QWEN,
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 4,
                "stream": True,
            }
        )

    def _counted_open(self) -> None:
        self.opened += 1
        if self.opened == self.count:
            self.all_open.set()

    async def one(self) -> None:
        opened = False
        try:
            async with self._opening:
                response = await self.session.post(
                    self.url, data=self._body, headers={"Content-Type": "application/json"}
                )
                if response.status != 200:
                    raise RuntimeError(
                        f"status {response.status}: {(await response.read())[:200]!r}"
                    )
                self.kv_bytes = int(response.headers.get(KV_BYTES_HEADER, 0))
                await response.content.readuntil(b"\n\n")  # the first event: open
            opened = True
            self._counted_open()
            async with response:
                rest = await response.content.read()
            if not rest.rstrip().endswith(b"data: [DONE]"):
                raise RuntimeError(f"stream ended without [DONE]: {rest[-200:]!r}")
            self.completed += 1
        except Exception as exc:  # every failure is a figure: counted and shown
            self.errors.append(f"{type(exc).__name__}: {exc}")
            if not opened:
                self._counted_open()  # so the run does not wait for it


async def gauge(session: aiohttp.ClientSession, metrics_port: int, name: str) -> float:
    """The sidecar's ``vlm_sidecar_<name>``, summed over its labels."""
    async with session.get(f"http://{HOST}:{metrics_port}/metrics") as reply:
        text = await reply.text()
    prefix = PREFIX + name + "{"
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


async def measure_streams(
    sidecar_pid: int, port: int, metrics_port: int, standin: Connection, count: int
) -> StreamFigures:
    healthz = f"http://{HOST}:{metrics_port}/healthz"
    chat = f"http://{HOST}:{port}/v1/chat/completions"
    loop = asyncio.get_running_loop()
    sampler = LagSampler(healthz)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
        aiohttp.ClientSession() as probe,
    ):
        warm = Streams(session, chat, 1)
        warm_task = asyncio.ensure_future(warm.one())
        await asyncio.wait_for(warm.all_open.wait(), 30)  # one stream through every stage
        lag_idle = await sampler.during(asyncio.sleep(LAG_SECONDS))
        rss_idle = rss_bytes(sidecar_pid)

        streams = Streams(session, chat, count)
        started = time.perf_counter()
        tasks = [asyncio.ensure_future(streams.one()) for _ in range(count)]
        lag_opening = await sampler.during(streams.all_open.wait())
        open_seconds = time.perf_counter() - started
        lag_open = await sampler.during(asyncio.sleep(LAG_SECONDS))
        rss_open = rss_bytes(sidecar_pid)
        sampler.close()

        started = time.perf_counter()
        await loop.run_in_executor(None, standin.send, "release")
        await loop.run_in_executor(None, standin.recv)
        await asyncio.gather(*tasks, warm_task)
        drain_seconds = time.perf_counter() - started
        await asyncio.sleep(0.2)  # the sidecar's handlers finish their records
        inflight_after = await gauge(probe, metrics_port, "inflight_requests")
        rss_after = rss_bytes(sidecar_pid)
    return StreamFigures(
        streams=count,
        rss_idle=rss_idle,
        rss_open=rss_open,
        rss_after=rss_after,
        open_seconds=open_seconds,
        drain_seconds=drain_seconds,
        lag_idle=lag_idle,
        lag_opening=lag_opening,
        lag_open=lag_open,
        completed=streams.completed,
        errors=warm.errors + streams.errors,
        inflight_after=inflight_after,
        kv_bytes_per_stream=warm.kv_bytes,
    )


@dataclass
class WaitingFigures:
    waiters: int
    rss_idle: int
    rss_waiting: int
    enqueue_seconds: float
    drain_seconds: float
    lag_idle: list[float]
    lag_waiting: list[float]
    completed: int
    errors: list[str]
    queue_depth_after: float
    inflight_after: float


async def until_queued(session: aiohttp.ClientSession, metrics_port: int, depth: int) -> None:
    deadline = time.perf_counter() + 60
    while await gauge(session, metrics_port, "queue_depth") < depth:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"fewer than {depth} requests came to wait in the sidecar")
        await asyncio.sleep(0.01)


async def measure_waiting(
    sidecar_pid: int, port: int, metrics_port: int, standin: Connection, count: int
) -> WaitingFigures:
    """One held stream holds the whole budget; ``count`` more streams arrive and queue."""
    healthz = f"http://{HOST}:{metrics_port}/healthz"
    chat = f"http://{HOST}:{port}/v1/chat/completions"
    loop = asyncio.get_running_loop()
    sampler = LagSampler(healthz)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
        aiohttp.ClientSession() as probe,
    ):
        await loop.run_in_executor(None, standin.send, "hold")
        await loop.run_in_executor(None, standin.recv)
        holder = Streams(session, chat, 1)
        holder_task = asyncio.ensure_future(holder.one())
        await asyncio.wait_for(holder.all_open.wait(), 30)
        lag_idle = await sampler.during(asyncio.sleep(LAG_SECONDS))
        rss_idle = rss_bytes(sidecar_pid)

        waiting = Streams(session, chat, count, paced=False)
        started = time.perf_counter()
        tasks: list[asyncio.Future[None]] = []
        while len(tasks) < count:  # paced by the sidecar's own count of waiters
            batch = min(OPENING_AT_ONCE, count - len(tasks))
            tasks += [asyncio.ensure_future(waiting.one()) for _ in range(batch)]
            await until_queued(probe, metrics_port, len(tasks))
        enqueue_seconds = time.perf_counter() - started
        lag_waiting = await sampler.during(asyncio.sleep(LAG_SECONDS))
        rss_waiting = rss_bytes(sidecar_pid)
        sampler.close()

        started = time.perf_counter()
        await loop.run_in_executor(None, standin.send, "release")
        await loop.run_in_executor(None, standin.recv)
        await asyncio.gather(*tasks, holder_task)
        drain_seconds = time.perf_counter() - started
        await asyncio.sleep(0.2)  # the sidecar's handlers finish their records
        depth_after = await gauge(probe, metrics_port, "queue_depth")
        inflight_after = await gauge(probe, metrics_port, "inflight_requests")
    return WaitingFigures(
        waiters=count,
        rss_idle=rss_idle,
        rss_waiting=rss_waiting,
        enqueue_seconds=enqueue_seconds,
        drain_seconds=drain_seconds,
        lag_idle=lag_idle,
        lag_waiting=lag_waiting,
        completed=waiting.completed,
        errors=holder.errors + waiting.errors,
        queue_depth_after=depth_after,
        inflight_after=inflight_after,
    )


def run_servers(streams: int, waiters: int) -> tuple[StreamFigures, WaitingFigures]:
    """(a) through a sidecar without a budget, then (c) through one whose budget fits one
    stream (as (a) priced it) and whose queue takes every waiter, both before one stand-in."""
    standin, standin_conn = start_holding_standin()
    sidecars: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []

    def sidecar(overrides: dict[str, object]) -> tuple[int, int, int]:
        sidecars.append(start(f"http://{HOST}:{standin_port}", overrides))
        child, conn = sidecars[-1]
        port, metrics_port = conn.recv()
        assert child.pid is not None
        return child.pid, port, metrics_port

    def stop(child: multiprocessing.process.BaseProcess, conn: Connection) -> None:
        with contextlib.suppress(OSError):
            conn.send("stop")
        child.join(10)
        if child.is_alive():
            child.kill()

    try:
        standin_port = standin_conn.recv()
        streamed = uvloop.run(measure_streams(*sidecar({}), standin_conn, streams))
        stop(*sidecars.pop())
        one_stream = streamed.kv_bytes_per_stream
        assert one_stream > 0, "the sidecar priced no KV for a stream"
        budget: dict[str, object] = {
            "kv_budget_bytes": one_stream + one_stream // 2,  # one fits, two do not
            "max_queue_depth": waiters + 1,
            "queue_timeout_seconds": 600,
        }
        queued = uvloop.run(measure_waiting(*sidecar(budget), standin_conn, waiters))
        return streamed, queued
    finally:
        for child, conn in [*sidecars, (standin, standin_conn)]:
            stop(child, conn)


# --- (b) waiting for KV budget -----------------------------------------------------------------


@dataclass
class QueueRun:
    enqueue_seconds: float
    grant_seconds: float
    waiter_bytes: float
    leftover_bytes: float


class Waiters:
    """One way to queue ``count`` waiters: ``enqueue`` starts them, ``grant`` lets all go."""

    def __init__(self, count: int) -> None:
        self.count = count

    async def setup(self) -> None: ...

    def waiter(self, number: int) -> Awaitable[None]:
        raise NotImplementedError

    def waiting(self) -> int:
        raise NotImplementedError

    def grant(self) -> None:
        raise NotImplementedError

    def check_empty(self) -> None: ...


class BaselineWaiters(Waiters):
    """The least a queue of waiters is: a future each, in an ``asyncio.Queue``."""

    async def setup(self) -> None:
        self.queue: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()

    async def waiter(self, number: int) -> None:
        future = asyncio.get_running_loop().create_future()
        self.queue.put_nowait(future)
        await future

    def waiting(self) -> int:
        return self.queue.qsize()

    def grant(self) -> None:
        queue = self.queue
        while not queue.empty():
            queue.get_nowait().set_result(None)

    def check_empty(self) -> None:
        assert self.queue.empty()


class LedgerWaiters(Waiters):
    """``KvLedger`` with a budget that fits one reservation, held while the rest arrive."""

    def __init__(self, count: int, classes: list[QueueClass]) -> None:
        super().__init__(count)
        self.classes = classes
        self.released = 0

    async def setup(self) -> None:
        self.ledger = KvLedger(MIB, max_queue_depth=self.count + 1)
        self.holder = await self.ledger.acquire(MIB, timeout_seconds=600)

    async def waiter(self, number: int) -> None:
        reservation = await self.ledger.acquire(MIB, 600, self.classes[number])
        reservation.release()
        self.released += 1

    def waiting(self) -> int:
        return self.ledger.queue_depth

    def grant(self) -> None:
        self.ledger.set_total_bytes((self.count + 1) * MIB)  # now every waiter fits

    def check_empty(self) -> None:
        self.holder.release()
        ledger = self.ledger
        assert self.released == self.count, f"{self.released} of {self.count} released"
        assert ledger.queue_depth == 0, f"{ledger.queue_depth} still waiting"
        assert ledger.tenants_waiting == 0, f"{ledger.tenants_waiting} tenants still waiting"
        assert ledger.inflight_requests == 0, f"{ledger.inflight_requests} still in flight"
        assert ledger.inflight_bytes == 0, f"{ledger.inflight_bytes} bytes still in flight"


async def queue_run(make: Callable[[], Waiters], traced: bool) -> QueueRun:
    """Enqueue every waiter, grant them all, let them finish; memory only when ``traced``
    (``tracemalloc`` slows every allocation, so the times come from untraced runs), counted
    from before the queue is made to after it is gone: what a drained queue leaves behind."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0] if traced else 0
    waiters = make()
    await waiters.setup()
    count = waiters.count
    gc.disable()  # a collection inside a timed step would be charged to it
    started = time.perf_counter()
    tasks = [asyncio.ensure_future(waiters.waiter(n)) for n in range(count)]
    await asyncio.sleep(0)  # every task runs up to its wait
    enqueued = time.perf_counter()
    waiting_bytes = tracemalloc.get_traced_memory()[0] - before if traced else 0
    assert waiters.waiting() == count, f"{waiters.waiting()} of {count} waiting"
    granting = time.perf_counter()
    waiters.grant()
    granted = time.perf_counter()
    await asyncio.gather(*tasks)
    waiters.check_empty()
    del tasks, waiters
    await asyncio.sleep(0)  # the gather's callbacks, which hold the tasks, run
    gc.enable()
    gc.collect()
    leftover = tracemalloc.get_traced_memory()[0] - before if traced else 0
    return QueueRun(
        enqueue_seconds=(enqueued - started) / count,
        grant_seconds=(granted - granting) / count,
        waiter_bytes=waiting_bytes / count,
        leftover_bytes=leftover,
    )


async def traced_rounds(make: Callable[[], Waiters], rounds: int) -> QueueRun:
    """The last of ``rounds`` traced runs on one loop: the first grows the loop's and the
    interpreter's own tables (timers, the set of all tasks) to 10,000, once for any queue."""
    tracemalloc.start()
    try:
        for _ in range(rounds - 1):
            await queue_run(make, traced=True)
        return await queue_run(make, traced=True)
    finally:
        tracemalloc.stop()


@dataclass
class QueueFigures:
    name: str
    enqueue_us: float
    grant_us: float
    waiter_bytes: float
    leftover_bytes: float


def measure_queues(count: int, runs: int) -> list[QueueFigures]:
    rng = random.Random(3)
    fair_classes = [
        QueueClass(rng.choice(BANDS), False, f"tenant-{rng.randrange(TENANTS)}")
        for _ in range(count)
    ]
    kinds: list[tuple[str, Callable[[], Waiters]]] = [
        ("baseline: futures in an asyncio.Queue", lambda: BaselineWaiters(count)),
        (
            "KvLedger, one tenant, one band (FIFO)",
            lambda: LedgerWaiters(count, [QueueClass()] * count),
        ),
        (
            f"KvLedger, {TENANTS:,} tenants in {len(BANDS)} bands (fair queue)",
            lambda: LedgerWaiters(count, fair_classes),
        ),
    ]
    timed: dict[str, list[QueueRun]] = {name: [] for name, _ in kinds}
    for _ in range(runs):  # interleaved, so each kind sees the same machine load
        for name, make in kinds:
            timed[name].append(uvloop.run(queue_run(make, traced=False)))
    figures = []
    for name, make in kinds:
        traced = uvloop.run(traced_rounds(make, 3))
        figures.append(
            QueueFigures(
                name=name,
                enqueue_us=statistics.median(r.enqueue_seconds for r in timed[name]) * 1e6,
                grant_us=statistics.median(r.grant_seconds for r in timed[name]) * 1e6,
                waiter_bytes=traced.waiter_bytes,
                leftover_bytes=traced.leftover_bytes,
            )
        )
    return figures


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Check:
    name: str
    measured: str
    limit: str
    ok: bool


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report_streams(figures: StreamFigures, asked: int, note: str) -> list[Check]:
    count = figures.streams
    per_stream_kib = (figures.rss_open - figures.rss_idle) / count / 1024
    print(f"## (a) {count:,} SSE streams open at once through one sidecar\n")
    if note:
        print(f"**{note}: {count:,} streams of the {asked:,} asked.**\n")
    print("| measured | value |")
    print("|---|---:|")
    print(f"| sidecar RSS, idle | {figures.rss_idle / MIB:,.1f} MiB |")
    print(f"| sidecar RSS, {count:,} streams open | {figures.rss_open / MIB:,.1f} MiB |")
    print(f"| sidecar RSS per open stream | {per_stream_kib:,.1f} KiB |")
    print(f"| sidecar RSS after all ended | {figures.rss_after / MIB:,.1f} MiB |")
    print(f"| time to open all | {figures.open_seconds:.1f} s |")
    print(f"| time for all to finish once released | {figures.drain_seconds:.1f} s |")
    print(f"| streams ended with [DONE] | {figures.completed:,} of {count:,} |")
    print(f"| errors | {len(figures.errors):,} |")
    print(f"| in-flight gauge after | {figures.inflight_after:g} |\n")
    print("| `/healthz` on the metrics port | p50 ms | p99 ms | max ms | samples |")
    print("|---|---:|---:|---:|---:|")
    for label, samples in (
        ("idle", figures.lag_idle),
        ("while the streams open", figures.lag_opening),
        (f"{count:,} streams open", figures.lag_open),
    ):
        print(
            f"| {label} | {statistics.median(samples):.2f} | {percentile(samples, 0.99):.2f} "
            f"| {max(samples):.2f} | {len(samples):,} |"
        )
    print()
    for error in figures.errors[:5]:
        print(f"    {error}", file=sys.stderr)
    added_p99 = percentile(figures.lag_open, 0.99) - percentile(figures.lag_idle, 0.99)
    return [
        Check(
            "(a) every stream ends with [DONE], no errors, nothing left in flight",
            f"{figures.completed:,} ok, {len(figures.errors):,} errors, "
            f"{figures.inflight_after:g} in flight",
            f"{count:,} ok, 0, 0",
            figures.completed == count and not figures.errors and figures.inflight_after == 0,
        ),
        Check(
            "(a) sidecar RSS per open stream",
            f"{per_stream_kib:.1f} KiB",
            f"<= {TARGET_RSS_PER_STREAM_KIB:g} KiB",
            per_stream_kib <= TARGET_RSS_PER_STREAM_KIB,
        ),
        Check(
            "(a) `/healthz` p99 with all open, above the idle p99",
            f"{added_p99:+.2f} ms",
            f"<= {TARGET_OPEN_LAG_P99_MS:g} ms",
            added_p99 <= TARGET_OPEN_LAG_P99_MS,
        ),
    ]


def report_waiting(figures: WaitingFigures) -> list[Check]:
    count = figures.waiters
    per_waiter_kib = (figures.rss_waiting - figures.rss_idle) / count / 1024
    print(f"## (c) {count:,} streams waiting for KV budget in one sidecar\n")
    print("| measured | value |")
    print("|---|---:|")
    print(f"| sidecar RSS, one stream holding the budget | {figures.rss_idle / MIB:,.1f} MiB |")
    print(f"| sidecar RSS, {count:,} more waiting | {figures.rss_waiting / MIB:,.1f} MiB |")
    print(f"| sidecar RSS per waiting request | {per_waiter_kib:,.1f} KiB |")
    print(f"| time for all to arrive and queue | {figures.enqueue_seconds:.1f} s |")
    print(
        f"| time to serve them all, one at a time, once released | {figures.drain_seconds:.1f} s "
        f"({figures.drain_seconds / count * 1e3:.2f} ms each) |"
    )
    print(f"| streams ended with [DONE] | {figures.completed:,} of {count:,} |")
    print(f"| errors | {len(figures.errors):,} |")
    print(
        f"| queue depth, in flight after | {figures.queue_depth_after:g}, "
        f"{figures.inflight_after:g} |\n"
    )
    print("| `/healthz` on the metrics port | p50 ms | p99 ms | max ms | samples |")
    print("|---|---:|---:|---:|---:|")
    for label, samples in (
        ("one stream holding the budget", figures.lag_idle),
        (f"{count:,} waiting", figures.lag_waiting),
    ):
        print(
            f"| {label} | {statistics.median(samples):.2f} | {percentile(samples, 0.99):.2f} "
            f"| {max(samples):.2f} | {len(samples):,} |"
        )
    print()
    for error in figures.errors[:5]:
        print(f"    {error}", file=sys.stderr)
    added_p99 = percentile(figures.lag_waiting, 0.99) - percentile(figures.lag_idle, 0.99)
    clean = (
        figures.completed == count
        and not figures.errors
        and figures.queue_depth_after == 0
        and figures.inflight_after == 0
    )
    return [
        Check(
            "(c) every waiter served, ends with [DONE], queue and ledger empty after",
            f"{figures.completed:,} ok, {len(figures.errors):,} errors, "
            f"{figures.queue_depth_after:g} waiting, {figures.inflight_after:g} in flight",
            f"{count:,} ok, 0, 0, 0",
            clean,
        ),
        Check(
            "(c) sidecar RSS per waiting request",
            f"{per_waiter_kib:.1f} KiB",
            f"<= {TARGET_RSS_PER_WAITER_KIB:g} KiB",
            per_waiter_kib <= TARGET_RSS_PER_WAITER_KIB,
        ),
        Check(
            "(c) `/healthz` p99 with all waiting, above the p99 before",
            f"{added_p99:+.2f} ms",
            f"<= {TARGET_OPEN_LAG_P99_MS:g} ms",
            added_p99 <= TARGET_OPEN_LAG_P99_MS,
        ),
    ]


def report_queues(figures: list[QueueFigures], count: int) -> list[Check]:
    print(f"## (b) {count:,} requests waiting for KV budget (in-process)\n")
    print(
        "| queue | memory per waiter | x baseline | enqueue µs | x baseline | grant µs "
        "| x baseline | memory left after |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    base = figures[0]
    checks = []
    for row in figures:
        memory = row.waiter_bytes / base.waiter_bytes
        enqueue = row.enqueue_us / base.enqueue_us
        grant = row.grant_us / base.grant_us
        print(
            f"| {row.name} | {row.waiter_bytes:,.0f} B | {memory:.2f}x | {row.enqueue_us:.2f} "
            f"| {enqueue:.2f}x | {row.grant_us:.2f} | {grant:.2f}x "
            f"| {row.leftover_bytes / 1024:,.1f} KiB |"
        )
        if row is base:
            continue
        short = row.name.split("(")[-1].rstrip(")")
        checks += [
            Check(
                f"(b) {short}: memory per waiter over the baseline",
                f"{memory:.2f}x",
                f"<= {TARGET_WAITER_MEMORY_RATIO:g}x",
                memory <= TARGET_WAITER_MEMORY_RATIO,
            ),
            Check(
                f"(b) {short}: enqueue over the baseline",
                f"{enqueue:.2f}x",
                f"<= {TARGET_ENQUEUE_RATIO:g}x",
                enqueue <= TARGET_ENQUEUE_RATIO,
            ),
            Check(
                f"(b) {short}: grant over the baseline",
                f"{grant:.2f}x",
                f"<= {TARGET_GRANT_RATIO:g}x",
                grant <= TARGET_GRANT_RATIO,
            ),
            Check(
                f"(b) {short}: memory left once drained and dropped",
                f"{row.leftover_bytes / 1024:,.1f} KiB",
                f"< {count / 1024:,.1f} KiB (1 byte per waiter)",
                row.leftover_bytes < count,
            ),
        ]
    print()
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2,000 streams and waiters, 2 rounds of the in-process queues",
    )
    parser.add_argument("--streams", type=int, default=None, help=f"default {STREAMS:,}")
    parser.add_argument("--waiters", type=int, default=WAITERS)
    args = parser.parse_args()
    started = time.perf_counter()
    asked = args.streams or (2_000 if args.quick else STREAMS)
    limit, note = raise_descriptor_limit(
        asked * DESCRIPTORS_PER_STREAM_IN_SIDECAR + DESCRIPTOR_MARGIN
    )
    count = streams_that_fit(asked, limit)
    print(
        f"Python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, uvloop, "
        f"load average {os.getloadavg()[0]:.1f}, RLIMIT_NOFILE {limit}\n"
    )
    # A waiting request holds one descriptor in the sidecar: its client's.
    waiting = min(2_000 if args.quick else args.waiters, limit - DESCRIPTOR_MARGIN)
    streamed, queued = run_servers(count, waiting)
    in_process = measure_queues(args.waiters, 2 if args.quick else RUNS)
    checks = report_streams(streamed, asked, note)
    checks += report_queues(in_process, args.waiters)
    checks += report_waiting(queued)
    print("| target | measured | limit | |")
    print("|---|---:|---:|---|")
    for check in checks:
        print(
            f"| {check.name} | {check.measured} | {check.limit} "
            f"| {'ok' if check.ok else 'MISSED'} |"
        )
    print(f"\n({time.perf_counter() - started:.0f} s)")
    missed = [check.name for check in checks if not check.ok]
    if missed:
        print(f"MISSED: {'; '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
