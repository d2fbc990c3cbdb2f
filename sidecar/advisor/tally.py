"""A replay counted: requests by decision and by reason, what the forwarded ones cost, the
images shrunk and the waits.

Counted per distinct answer, not request by request: a million requests are a few hundred
thousand distinct recorded costs, each answered once and weighted by its requests; then the
requests refused before pricing, and those the ledger made wait or refused, a column at a
time.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import NamedTuple

from sidecar.admission.decision import Decision, Reason, after_hold
from sidecar.advisor.replay import FATE_REASONS, ReplayResult

_ADMIT, _REJECT, _DOWNSCALE = Decision.ADMIT, Decision.REJECT, Decision.DOWNSCALE
_REFUSED_FATES, _KV_BUDGET_FULL = frozenset(FATE_REASONS), Reason.KV_BUDGET_FULL
_DECISION, _REASON = attrgetter("decision"), attrgetter("reason")
_DECISION_AND_REASON = attrgetter("decision", "reason")
_VISUAL, _PROMPT, _KV = (
    attrgetter("visual_tokens"),
    attrgetter("prompt_tokens"),
    attrgetter("kv_bytes"),
)
_SHRUNK = attrgetter("downscaled_images")


class Tally(NamedTuple):
    """What a candidate did with the recorded requests."""

    decisions: Counter[Decision]
    reasons: Counter[Reason | str]  # a recorded reason counts with the Reason it names
    visual_tokens: Counter[int]  # per forwarded request, after any downscale
    prompt_tokens: Counter[int]
    kv_bytes: Counter[int]
    images: int  # in the priced requests, as sent
    downscaled_images: int  # made smaller by the sidecar, in forwarded requests
    waits: Counter[float]  # seconds, per request that waited


def tally(result: ReplayResult) -> Tally:
    """Count ``result``: every request as its cost was answered, then the requests the
    ledger changed moved from that answer to their own."""
    decisions: Counter[Decision] = Counter()
    reasons: Counter[Reason | str] = Counter()
    visual: Counter[int] = Counter()
    prompt: Counter[int] = Counter()
    kv: Counter[int] = Counter()
    images = shrunk = 0
    # Walked in step (the requests are in the answers' order): no lookup per cost.
    for (cost, answer), count in zip(result.answers.items(), result.requests.values(), strict=True):
        images += len(cost.images) * count
        decision, reason = answer.decision, answer.reason
        decisions[decision] = decisions.get(decision, 0) + count
        reasons[reason] = reasons.get(reason, 0) + count
        if decision is not _REJECT:
            value = answer.visual_tokens
            visual[value] = visual.get(value, 0) + count
            value = answer.prompt_tokens
            prompt[value] = prompt.get(value, 0) + count
            value = answer.kv_bytes
            kv[value] = kv.get(value, 0) + count
            shrunk += answer.downscaled_images * count
    # Refused before pricing: counted as recorded.
    unpriced = result.unpriced.values()
    decisions.update(map(_DECISION, unpriced))
    reasons.update(map(_REASON, unpriced))
    # The ledger's, as ``Queued.outcome`` decides one request, a column at a time: a 429
    # moves from its answer to a refusal and leaves the forwarded prices; one that waited is
    # recorded as ``after_hold`` says (an admit becomes a wait, a downscale stays one).
    queued = result.queued
    refused = [
        (fate, answer)
        for fate, answer in zip(queued.fates, queued.answers, strict=True)
        if fate in _REFUSED_FATES
    ]
    was = [answer for _, answer in refused]
    decisions.subtract(Counter(map(_DECISION, was)))
    reasons.subtract(Counter(map(_REASON, was)))
    decisions[_REJECT] += len(refused)
    reasons.update([FATE_REASONS[fate] for fate, _ in refused])
    held = Counter(
        map(
            _DECISION_AND_REASON,
            [
                answer
                for fate, answer in zip(queued.fates, queued.answers, strict=True)
                if fate not in _REFUSED_FATES
            ],
        )
    )
    for (decision, reason), count in held.items():  # a few distinct answers, many requests
        now_decision, now_reason = after_hold(decision, reason, _KV_BUDGET_FULL)
        decisions[decision] -= count
        reasons[reason] -= count
        decisions[now_decision] += count
        reasons[now_reason] += count
    dropped = [answer for _, answer in refused]  # only forwarded answers ever queue
    for counter, field in ((visual, _VISUAL), (prompt, _PROMPT), (kv, _KV)):
        counter.subtract(Counter(map(field, dropped)))
    shrunk -= sum(map(_SHRUNK, dropped))
    waits = Counter(
        [
            wait
            for fate, answer, wait in zip(queued.fates, queued.answers, queued.waits, strict=True)
            if fate not in _REFUSED_FATES
            and (answer.decision is _ADMIT or (answer.decision is _DOWNSCALE and wait > 0))
        ]
    )
    # Counts moved to zero are dropped (unary plus): what was never answered is not shown.
    return Tally(+decisions, +reasons, +visual, +prompt, +kv, images, shrunk, waits)
