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
    changed = result.changed.values()
    # Most changed requests keep their answer's decision and reason (a downscale that
    # waited); those that do not move from it. Refused before pricing: counted as recorded.
    moved = [o for o in changed if o.priced is None or o.reason is not o.priced.reason]
    was = [o.priced for o in moved if o.priced is not None]
    decisions.subtract(Counter(map(_DECISION, was)))
    decisions.update(map(_DECISION, moved))
    reasons.subtract(Counter(map(_REASON, was)))
    reasons.update(map(_REASON, moved))
    # A request the ledger refused is not forwarded; one that waited is, at its price.
    dropped = [o.priced for o in moved if o.decision is _REJECT and o.priced is not None]
    dropped = [answer for answer in dropped if answer.decision is not _REJECT]
    for counter, field in ((visual, _VISUAL), (prompt, _PROMPT), (kv, _KV)):
        counter.subtract(Counter(map(field, dropped)))
    shrunk -= sum(map(_SHRUNK, dropped))
    waits = Counter(
        [
            o.wait_seconds
            for o in changed
            if o.decision is _WAIT or (o.decision is _DOWNSCALE and o.wait_seconds > 0)
        ]
    )
    # Counts moved to zero are dropped (unary plus): what was never answered is not shown.
    return Tally(+decisions, +reasons, +visual, +prompt, +kv, images, shrunk, waits)
