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
from typing import cast

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.priced import Priced
from sidecar.advisor.records import RecordedCost, TrafficRecord, bulk
from sidecar.advisor.repricing import Candidate
from sidecar.advisor.simulation import Fate, Jobs, Queueing, Simulated, simulate
from sidecar.settings import Mode

_FATE_REASONS = {Fate.QUEUE_TIMEOUT: Reason.QUEUE_TIMEOUT, Fate.QUEUE_FULL: Reason.QUEUE_FULL}
_DECISIONS = {decision.value: decision for decision in Decision}
_COST, _HELD, _ARRIVAL = attrgetter("cost"), attrgetter("held_seconds"), attrgetter("arrival")


@dataclass(slots=True, eq=False)
class Outcome:
    """What the candidate does with one recorded request. Requests with one answer share
    one ``Outcome`` (most of a million never wait), so it is never changed once made, and
    it is counted by identity."""

    decision: Decision
    reason: Reason | str  # a recorded reason is kept as it was written
    priced: Priced | None  # None: refused before pricing, as recorded
    wait_seconds: float = 0.0

    @property
    def forwarded(self) -> bool:
        return self.priced is not None and self.decision is not Decision.REJECT


@dataclass(frozen=True)
class ReplayResult:
    """What the candidate does with each record, kept as it is worked out: each recorded
    cost's answer, shared by every request of that cost, and the requests whose outcome is
    another (the ledger made them wait or refused them; refused before pricing as
    recorded). ``outcomes`` spells it out request by request."""

    costs: Sequence[RecordedCost | None]  # per record
    requests: Mapping[RecordedCost, int]  # per priced cost, in the answers' order
    answers: Mapping[RecordedCost, Priced]  # each priced cost's answer
    changed: Mapping[int, Outcome]  # by record number
    simulated: Simulated
    service_time_estimated: int  # jobs given the median service time

    @cached_property
    def outcomes(self) -> tuple[Outcome, ...]:
        """Each record's outcome, aligned with the records."""
        as_priced: dict[RecordedCost | None, Outcome] = {
            cost: Outcome(answer.decision, answer.reason, answer)
            for cost, answer in self.answers.items()
        }
        outcomes = cast("list[Outcome]", list(map(as_priced.get, self.costs)))
        for number, outcome in self.changed.items():
            outcomes[number] = outcome
        return tuple(outcomes)


def queueing_for(candidate: Candidate) -> Queueing:
    """The candidate's in-flight budget and queue."""
    settings = candidate.settings
    return Queueing(
        budget_bytes=candidate.budgets.kv_budget_bytes,
        timeout_seconds=float(settings.queue_timeout_seconds),
        max_depth=settings.max_queue_depth,
        shadow=settings.mode is Mode.SHADOW,
    )


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
    requests.pop(None, None)  # refused before pricing: kept as recorded (``_changed``)
    # Each distinct cost priced once: the reader gives equal costs one object.
    answers = {cost: candidate.price(cost) for cost in requests}
    jobs, estimated = _jobs(records, costs, answers, queueing)
    simulated = simulate(jobs, queueing)
    changed = _changed(records, costs, answers, simulated, queueing.shadow)
    return ReplayResult(
        costs, cast("Counter[RecordedCost]", requests), answers, changed, simulated, estimated
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


def _changed(
    records: Sequence[TrafficRecord],
    costs: Sequence[RecordedCost | None],
    answers: dict[RecordedCost, Priced],
    simulated: Simulated,
    shadow: bool,
) -> dict[int, Outcome]:
    """The records whose outcome is not their price's: refused before pricing (their
    recorded answer), or made to wait or refused by the ledger."""
    changed: dict[int, Outcome] = {}
    if None in costs:
        for number in [n for n, cost in enumerate(costs) if cost is None]:
            record = records[number]
            recorded = _DECISIONS.get(record.decision, Decision.REJECT)
            changed[number] = Outcome(recorded, record.reason, None)
    fates, waits = simulated.fates, simulated.waits
    numbers: Iterable[int] = compress(range(len(fates)), map(is_not, fates, repeat(Fate.GRANTED)))
    if shadow:
        numbers = sorted({*numbers, *compress(range(len(fates)), simulated.would_wait)})
    # Enum members read once: a class attribute costs more than the rest of a step here.
    waited, admit, reject, wait_decision = (
        Fate.WAITED,
        Decision.ADMIT,
        Decision.REJECT,
        Decision.WAIT,
    )
    full = Reason.KV_BUDGET_FULL
    for number in numbers:
        fate, wait = fates[number], waits[number]
        answer = answers[cast(RecordedCost, costs[number])]
        if fate is not waited and fate in _FATE_REASONS:
            changed[number] = Outcome(reject, _FATE_REASONS[fate], answer, wait)
        elif answer.decision is admit:
            changed[number] = Outcome(wait_decision, full, answer, wait)
        else:
            changed[number] = Outcome(answer.decision, answer.reason, answer, wait)
    return changed


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
