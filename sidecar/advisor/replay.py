"""Replay: every record re-priced under a candidate, then the in-flight ledger simulated.

A request refused before it could be priced (a body vLLM would refuse, a corrupt image) keeps
its recorded answer. A request that was never forwarded when recorded has no service time;
it gets the median of the others', and the report says how many did.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import NamedTuple, cast

from sidecar.admission.decision import Decision, Reason, after_hold
from sidecar.admission.discipline import (
    DEFAULT_CLASS,
    NO_TAGS,
    PriorityPolicy,
    QueueClass,
    QueueTags,
    classify,
)
from sidecar.advisor.priced import Priced
from sidecar.advisor.records import RecordedCost, TrafficRecord, bulk
from sidecar.advisor.repricing import Candidate
from sidecar.advisor.simulation import Fate, Jobs, Queueing, Simulated, simulate
from sidecar.settings import Mode

# The ledger's refusals, as the live sidecar answers them (429).
FATE_REASONS = {
    Fate.QUEUE_TIMEOUT: Reason.QUEUE_TIMEOUT,
    Fate.QUEUE_FULL: Reason.QUEUE_FULL,
    Fate.SHED: Reason.SHED,
}
_DECISIONS = {decision.value: decision for decision in Decision}
_COST, _HELD, _ARRIVAL = attrgetter("cost"), attrgetter("held_seconds"), attrgetter("arrival")
_TAGS = attrgetter("objective", "body_priority", "tenant")
_OBJECTIVE, _BODY_PRIORITY, _TENANT = map(attrgetter, ("objective", "body_priority", "tenant"))


@dataclass(slots=True, eq=False)
class Outcome:
    """What the candidate does with one recorded request. Requests with one answer share
    one ``Outcome`` (most of a million never wait), so it is never changed once made, and
    it is counted by identity."""

    decision: Decision
    reason: Reason | str  # a recorded reason is kept as it was written
    priced: Priced | None  # None: refused before pricing, as recorded
    wait_seconds: float = 0.0


class Queued(NamedTuple):
    """The requests the ledger did not grant at once, as columns in record order: each one's
    record number, fate and wait, and its cost's answer. In shadow mode, those ``decide``
    would have made wait (granted: they wait nothing)."""

    numbers: list[int]
    fates: list[Fate]
    waits: list[float]
    answers: list[Priced]

    def outcome(self, fate: Fate, answer: Priced, wait: float) -> Outcome:
        """What such a request gets: a 429 when the queue refused it, else its answer, an
        admit turned into a wait."""
        refused = FATE_REASONS.get(fate)
        if refused is not None:
            return Outcome(Decision.REJECT, refused, answer, wait)
        decision, reason = after_hold(answer.decision, answer.reason, Reason.KV_BUDGET_FULL)
        return Outcome(decision, reason, answer, wait)


@dataclass(frozen=True)
class ReplayResult:
    """What the candidate does with each record, kept as it is worked out: each recorded
    cost's answer, shared by every request of that cost, the requests refused before
    pricing (kept as recorded), and those the ledger made wait or refused. ``outcomes``
    spells it out request by request; ``tally`` counts it."""

    costs: Sequence[RecordedCost | None]  # per record
    requests: Mapping[RecordedCost, int]  # per priced cost, in the answers' order
    answers: Mapping[RecordedCost, Priced]  # each priced cost's answer
    unpriced: Mapping[int, Outcome]  # by record number
    queued: Queued
    simulated: Simulated
    service_time_estimated: int  # jobs given the median service time
    classes: Sequence[QueueClass] | None = None  # per record; None: one band, one tenant

    @cached_property
    def outcomes(self) -> tuple[Outcome, ...]:
        """Each record's outcome, aligned with the records."""
        as_priced: dict[RecordedCost | None, Outcome] = {
            cost: Outcome(answer.decision, answer.reason, answer)
            for cost, answer in self.answers.items()
        }
        outcomes = cast("list[Outcome]", list(map(as_priced.get, self.costs)))
        for number, outcome in self.unpriced.items():
            outcomes[number] = outcome
        queued = self.queued
        for number, fate, wait, answer in zip(
            queued.numbers, queued.fates, queued.waits, queued.answers, strict=True
        ):
            outcomes[number] = queued.outcome(fate, answer, wait)
        return tuple(outcomes)


def queueing_for(candidate: Candidate) -> Queueing:
    """The candidate's in-flight budget and queue."""
    settings = candidate.settings
    return Queueing(
        budget_bytes=candidate.budgets.kv_budget_bytes,
        timeout_seconds=float(settings.queue_timeout_seconds),
        max_depth=settings.max_queue_depth,
        shadow=settings.mode is Mode.SHADOW,
        max_tenant_depth=settings.max_tenant_queue_depth,
        aging_seconds=settings.priority_aging_seconds,
    )


def classes_for(
    records: Sequence[TrafficRecord], policy: PriorityPolicy
) -> list[QueueClass] | None:
    """Each record's queue class under ``policy``, from its recorded tags (``classify``,
    as the live sidecar does); None when every record is in one band as one tenant."""
    # Most logs carry no tags at all: seen at C speed, before a tuple per record is made.
    if (
        not any(map(_TENANT, records))
        and list(map(_OBJECTIVE, records)).count(None) == len(records)
        and list(map(_BODY_PRIORITY, records)).count(None) == len(records)
    ):
        return None
    tags = list(map(_TAGS, records))
    untagged = (None, None, "")
    memo: dict[tuple[str | None, int | None, str], QueueClass] = {untagged: DEFAULT_CLASS}
    classes = []
    for tag in tags:
        queue_class = memo.get(tag)
        if queue_class is None:
            queue_class = memo[tag] = classify(
                QueueTags(*tag) if tag != untagged else NO_TAGS, policy
            )
        classes.append(queue_class)
    return None if all(c is DEFAULT_CLASS for c in classes) else classes


def replay(records: Sequence[TrafficRecord], candidate: Candidate) -> ReplayResult:
    """Re-decide every record under ``candidate`` (records are in arrival order)."""
    with bulk():
        return _replay(records, candidate)


def _replay(records: Sequence[TrafficRecord], candidate: Candidate) -> ReplayResult:
    # Column-wise, at C speed where it can be (map, zip, compress), and keyed by the cost
    # objects the reader shares: a Python loop over a million requests costs a second.
    queueing = queueing_for(candidate)
    costs = list(map(_COST, records))
    requests = Counter(costs)
    unpriced = requests.pop(None, 0)  # refused before pricing: kept as recorded
    # Each distinct cost priced once: the reader gives equal costs one object.
    answers = {cost: candidate.price(cost) for cost in requests}
    # Classes order only a queue: without a budget (or in shadow mode) nothing waits.
    classes = (
        classes_for(records, PriorityPolicy.from_settings(candidate.settings))
        if queueing.budget_bytes and not queueing.shadow
        else None
    )
    jobs, estimated = _jobs(records, costs, answers, queueing)
    simulated = simulate(jobs._replace(classes=classes), queueing)
    return ReplayResult(
        costs,
        cast("Counter[RecordedCost]", requests),
        answers,
        _unpriced(records, costs) if unpriced else {},
        _queued(costs, answers, simulated, queueing.shadow),
        simulated,
        estimated,
        classes,
    )


def _jobs(
    records: Sequence[TrafficRecord],
    costs: Sequence[RecordedCost | None],
    answers: dict[RecordedCost, Priced],
    queueing: Queueing,
) -> tuple[Jobs, int]:
    """Every record as the ledger sees it: arrival, KV bytes (None: not forwarded) and
    service time; and how many forwarded ones were given the median service time."""
    jobs_kv: dict[RecordedCost | None, int] = {
        cost: answer.kv_bytes
        for cost, answer in answers.items()
        if queueing.shadow or answer.decision is not Decision.REJECT
    }
    kv_bytes = list(map(jobs_kv.get, costs))
    helds = list(map(_HELD, records))
    estimated = 0
    if None in helds:  # never forwarded when recorded: the median of the others' service times
        known = [held for held in helds if held is not None]
        typical = statistics.median(known) if known else 0.0
        estimated = sum(
            kv is not None and held is None for kv, held in zip(kv_bytes, helds, strict=True)
        )
        helds = [typical if held is None else held for held in helds]
    jobs = Jobs(list(map(_ARRIVAL, records)), kv_bytes, cast("list[float]", helds))
    return jobs, estimated


def _unpriced(
    records: Sequence[TrafficRecord], costs: Sequence[RecordedCost | None]
) -> dict[int, Outcome]:
    """The records refused before pricing, with their recorded answer."""
    unpriced = {}
    for number in [n for n, cost in enumerate(costs) if cost is None]:
        record = records[number]
        recorded = _DECISIONS.get(record.decision, Decision.REJECT)
        unpriced[number] = Outcome(recorded, record.reason, None)
    return unpriced


def _queued(
    costs: Sequence[RecordedCost | None],
    answers: dict[RecordedCost, Priced],
    simulated: Simulated,
    shadow: bool,
) -> Queued:
    """The requests the ledger did not grant at once, taken a column at a time."""
    fates, waits = simulated.fates, simulated.waits
    numbers = list(compress(range(len(fates)), map(is_not, fates, repeat(Fate.GRANTED))))
    if shadow:
        numbers = sorted({*numbers, *compress(range(len(fates)), simulated.would_wait)})
    costs_of = map(costs.__getitem__, numbers)
    return Queued(
        numbers,
        list(map(fates.__getitem__, numbers)),
        list(map(waits.__getitem__, numbers)),
        list(map(answers.__getitem__, cast("Iterable[RecordedCost]", costs_of))),
    )


def priced_as_recorded(
    records: Sequence[TrafficRecord], candidate: Candidate
) -> tuple[TrafficRecord, ...]:
    """Records whose "as recorded" figures are their price under ``candidate`` (for a
    synthetic traffic, which has no recorded price)."""
    priced = []
    for record in records:
        if record.cost is not None:
            answer = candidate.price(record.cost)
            record = replace(
                record,
                visual_tokens=answer.visual_tokens,
                prompt_tokens=answer.prompt_tokens,
                kv_bytes=answer.kv_bytes,
            )
        priced.append(record)
    return tuple(priced)
