"""The order waiters for the in-flight KV budget are served in: bands, then fair by KV bytes.

Each waiter carries its class's band (an integer priority, higher served first) and tenant
(``admission.discipline``). ``FairQueue`` orders them:

* **Bands, strictly.** The head is always in the highest band that has a waiter.
* **Fair within a band, charged in KV.** Start-time fair queueing over predicted KV bytes: a
  waiter's start tag is ``max(V, the tenant's last finish tag)`` and its finish tag is that
  plus its ``kv_bytes``; the band's head is the waiter with the smallest start tag, and
  ``V`` (the band's virtual time) becomes the start tag of each waiter granted. A tenant
  with a backlog of 850 MiB scans has start tags 850 MiB apart; a tenant that sends one
  small request at a time starts at ``V`` and goes next. Ties go to the earlier arrival,
  so one tenant alone (every request without the header is the tenant ``""``) queues in
  arrival order: FIFO, exactly as without this module.
* **Work-conserving.** No tenant or band is given a reserved share: whatever the budget
  holds is granted to whoever is at the head. The ledger stops at a head that does not fit
  (as FIFO does), so a large request is never starved by small ones behind it.
* **Aging** (``aging_seconds`` > 0; off by default): a waiter that has waited that long is
  served before every waiter that has not, oldest first, whatever its band. So no stream
  of higher-band traffic holds a lower band back for more than ``aging_seconds`` plus the
  time for the budget to free its bytes. Aging is checked when the ledger grants (a release
  or an arrival), not on a timer.
* **Bounded memory.** A band exists only while it has waiters; a tenant only while it has
  waiters or a finish tag ahead of ``V`` (and, past ``MAX_IDLE_TENANTS`` such tenants, the
  ones nearest ``V`` are forgotten first). When a band's queue drains, everyone in it
  starts level again. Removal is lazy: a waiter that leaves is marked, and skipped when
  reached.

Sheddable requests never enter the queue. ``FairQueue`` is pure: the caller passes the time
and decides what fits; ``KvLedger`` and the replay's simulation drive the same class.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Iterator
from enum import IntEnum
from typing import Generic, TypeVar

# Idle tenants remembered per band for their debt; beyond this the least indebted go.
MAX_IDLE_TENANTS = 4096

T = TypeVar("T")


class EntryState(IntEnum):
    WAITING = 0
    GRANTED = 1
    LEFT = 2


class Entry(Generic[T]):
    """One waiter: what the caller queued (``item``), its cost, class and tags."""

    __slots__ = ("arrival", "item", "kv_bytes", "priority", "seq", "start", "state", "tenant")

    def __init__(
        self, item: T, kv_bytes: int, priority: int, tenant: str, arrival: float, seq: int
    ) -> None:
        self.item = item
        self.kv_bytes = kv_bytes
        self.priority = priority
        self.tenant = tenant
        self.arrival = arrival
        self.seq = seq
        self.start = 0
        self.state = EntryState.WAITING


class _Tenant(Generic[T]):
    __slots__ = ("entries", "finish", "marker", "waiting")

    def __init__(self) -> None:
        self.entries: deque[Entry[T]] = deque()
        self.finish = 0
        self.waiting = 0
        self.marker: Entry[T] | None = None  # the entry that stands for it in the band's heap

    def live_head(self) -> Entry[T] | None:
        entries = self.entries
        while entries and entries[0].state is not EntryState.WAITING:
            entries.popleft()
        return entries[0] if entries else None


class _Band(Generic[T]):
    __slots__ = ("heads", "idle", "tenants", "virtual_time", "waiting")

    def __init__(self) -> None:
        self.virtual_time = 0
        self.waiting = 0
        self.tenants: dict[str, _Tenant[T]] = {}
        # (start tag, arrival number, entry): one per tenant with waiters, some stale; tuples
        # compare in C, and the unique arrival number settles every tie before the entry.
        self.heads: list[tuple[int, int, Entry[T]]] = []
        self.idle: list[tuple[int, str]] = []  # (finish tag, tenant) of tenants without waiters

    def head(self) -> Entry[T] | None:
        heads = self.heads
        while heads:
            top = heads[0][2]
            if top.state is EntryState.WAITING:
                return top
            heapq.heappop(heads)
            tenant = self.tenants.get(top.tenant)
            if tenant is not None and tenant.marker is top:  # else a stale stand-in: dropped
                tenant.marker = nxt = tenant.live_head()
                if nxt is not None:
                    heapq.heappush(heads, (nxt.start, nxt.seq, nxt))
        return None

    def compact(self) -> None:
        """Rebuild the heap from each tenant's live head once stale stand-ins outnumber them
        (a waiter that stays at the top would keep them from ever being popped)."""
        if len(self.heads) <= 2 * len(self.tenants) + 64:
            return
        heads: list[tuple[int, int, Entry[T]]] = []
        for tenant in self.tenants.values():
            tenant.marker = head = tenant.live_head() if tenant.waiting else None
            if head is not None:
                heads.append((head.start, head.seq, head))
        heapq.heapify(heads)
        self.heads = heads

    def forget_idle(self) -> None:
        """Drop tenants with no waiters whose finish tag ``V`` has passed, and the excess."""
        idle, tenants = self.idle, self.tenants
        while idle and (idle[0][0] <= self.virtual_time or len(idle) > MAX_IDLE_TENANTS):
            finish, name = heapq.heappop(idle)
            tenant = tenants.get(name)
            if tenant is not None and tenant.waiting == 0 and tenant.finish == finish:
                del tenants[name]


class FairQueue(Generic[T]):
    """Waiters ordered by band, then start-time fair queueing over KV bytes (pure: the
    caller passes the time in seconds, and grants or removes the entries it chooses)."""

    def __init__(self, *, max_tenant_depth: int = 0, aging_seconds: float = 0.0) -> None:
        self._max_tenant_depth = max_tenant_depth  # 0: unbounded (the ledger's depth bounds it)
        self._aging_seconds = aging_seconds
        self._bands: dict[int, _Band[T]] = {}
        self._priorities: list[int] = []  # bands with waiters, ascending
        self._arrivals: deque[Entry[T]] = deque()  # every waiter in arrival order (lazy)
        self._waiting = 0
        self._seq = 0

    def __len__(self) -> int:
        return self._waiting

    def tenant_full(self, priority: int, tenant: str) -> bool:
        """Whether ``tenant`` already has the most waiters one tenant may have in a band."""
        if not self._max_tenant_depth:
            return False
        band = self._bands.get(priority)
        state = band.tenants.get(tenant) if band is not None else None
        return state is not None and state.waiting >= self._max_tenant_depth

    def push(self, item: T, kv_bytes: int, priority: int, tenant: str, now: float) -> Entry[T]:
        """Queue ``item``; the caller checks ``tenant_full`` first."""
        band = self._bands.get(priority)
        if band is None:
            band = self._bands[priority] = _Band()
            bisect.insort(self._priorities, priority)
        state = band.tenants.get(tenant)
        if state is None:
            state = band.tenants[tenant] = _Tenant()
        self._seq += 1
        entry = Entry(item, kv_bytes, priority, tenant, now, self._seq)
        entry.start = max(band.virtual_time, state.finish)
        state.finish = entry.start + kv_bytes
        if not state.waiting:
            state.marker = entry
            heapq.heappush(band.heads, (entry.start, entry.seq, entry))
        state.entries.append(entry)
        state.waiting += 1
        band.waiting += 1
        self._waiting += 1
        self._arrivals.append(entry)
        return entry

    def head(self, now: float) -> Entry[T] | None:
        """The waiter to grant next: an aged one first, else the top band's fairest."""
        if self._aging_seconds > 0:
            oldest = self.oldest()
            if oldest is not None and now - oldest.arrival >= self._aging_seconds:
                return oldest
        if not self._priorities:
            return None
        return self._bands[self._priorities[-1]].head()

    def oldest(self) -> Entry[T] | None:
        """The waiter that arrived first (whose deadline comes first)."""
        arrivals = self._arrivals
        while arrivals and arrivals[0].state is not EntryState.WAITING:
            arrivals.popleft()
        return arrivals[0] if arrivals else None

    def grant(self, entry: Entry[T]) -> None:
        """Take ``entry`` (a waiter) out as granted; its band's virtual time moves to it."""
        band = self._bands[entry.priority]
        band.virtual_time = max(band.virtual_time, entry.start)
        self._take(entry, EntryState.GRANTED)

    def remove(self, entry: Entry[T]) -> None:
        """Take ``entry`` out because it left (timed out, cancelled); no-op if already out."""
        if entry.state is EntryState.WAITING:
            self._take(entry, EntryState.LEFT)

    def waiting_by_band(self) -> Iterator[tuple[int, int]]:
        """``(priority, waiters)`` of each band that has waiters, highest first."""
        for priority in reversed(self._priorities):
            yield priority, self._bands[priority].waiting

    def oldest_by_band(self) -> Iterator[tuple[int, float]]:
        """``(priority, arrival)`` of each band's oldest waiter (a tenant's waiters are in
        arrival order, so it is the oldest of the tenants' heads)."""
        for priority in reversed(self._priorities):
            band = self._bands[priority]
            heads = (t.live_head() for t in band.tenants.values() if t.waiting)
            yield priority, min(head.arrival for head in heads if head is not None)

    @property
    def tenants_waiting(self) -> int:
        """Tenants with at least one waiter, over all bands."""
        return sum(
            sum(1 for t in band.tenants.values() if t.waiting) for band in self._bands.values()
        )

    def _take(self, entry: Entry[T], state: EntryState) -> None:
        entry.state = state
        band = self._bands[entry.priority]
        tenant = band.tenants[entry.tenant]
        tenant.waiting -= 1
        band.waiting -= 1
        self._waiting -= 1
        if not band.waiting:  # drained: the band and its tenants' debts are forgotten
            del self._bands[entry.priority]
            del self._priorities[bisect.bisect_left(self._priorities, entry.priority)]
            if not self._waiting:
                self._arrivals.clear()
            return
        if not tenant.waiting:
            tenant.entries.clear()
            if tenant.finish > band.virtual_time:
                heapq.heappush(band.idle, (tenant.finish, entry.tenant))
            else:
                del band.tenants[entry.tenant]
        band.forget_idle()
        band.compact()
        arrivals = self._arrivals
        if len(arrivals) > 2 * self._waiting + 64:  # amortised: dead entries behind the oldest
            self._arrivals = deque(e for e in arrivals if e.state is EntryState.WAITING)
