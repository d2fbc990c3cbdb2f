"""A replay counted: requests by decision and by reason, what the forwarded ones cost, the
images shrunk and the waits.

Counted per distinct answer, not request by request: a million requests are a few hundred
thousand distinct recorded costs, each answered once and weighted by its requests, and the
requests the ledger changed (they waited, or were refused), counted one by one.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import NamedTuple

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.replay import ReplayResult

_REJECT, _WAIT, _DOWNSCALE = Decision.REJECT, Decision.WAIT, Decision.DOWNSCALE
_DECISION, _REASON = attrgetter("decision"), attrgetter("reason")
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
    """Count ``result``."""
    decisions: Counter[Decision] = Counter()
    reasons: Counter[Reason | str] = Counter()
    visual: Counter[int] = Counter()
    prompt: Counter[int] = Counter()
    kv: Counter[int] = Counter()
    images = shrunk = 0
    costs, changed, requests = result.costs, result.changed, result.requests
    moved = Counter(map(costs.__getitem__, changed))  # requests not answered as priced
    moved_get = moved.get
    for cost, answer in result.answers.items():
        total = requests[cost]
        images += len(cost.images) * total
        count = total - moved_get(cost, 0)
        if not count:  # every request of this cost waited or was refused
            continue
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
    outcomes = changed.values()
    decisions.update(map(_DECISION, outcomes))
    reasons.update(map(_REASON, outcomes))
    forwarded = [o.priced for o in outcomes if o.priced is not None and o.decision is not _REJECT]
    visual.update(map(_VISUAL, forwarded))
    prompt.update(map(_PROMPT, forwarded))
    kv.update(map(_KV, forwarded))
    shrunk += sum(map(_SHRUNK, forwarded))
    waits = Counter(
        [
            o.wait_seconds
            for o in outcomes
            if o.decision is _WAIT or (o.decision is _DOWNSCALE and o.wait_seconds > 0)
        ]
    )
    return Tally(decisions, reasons, visual, prompt, kv, images, shrunk, waits)
