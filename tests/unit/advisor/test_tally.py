"""advisor.tally: a replay counted per distinct answer equals it counted request by request."""

from __future__ import annotations

from collections import Counter

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.records import RecordedCost
from sidecar.advisor.replay import replay
from sidecar.advisor.tally import tally
from tests.support.traffic_records import PHOTO, TEXT, candidate, record

BIG = RecordedCost(
    images=((4000, 3000, "jpeg", "data"), (640, 480, "png", "data")),
    text_tokens=10,
    text_exact=False,
    output_tokens=16,
    output_requested=16,
)


def test_tally_counts_decisions_reasons_and_forwarded_costs_weighted_by_requests() -> None:
    records = [
        record(0, PHOTO),
        record(1, PHOTO),
        record(2, BIG),
        record(3, None, held=None, decision="reject", reason="invalid_body"),
    ]
    chosen = candidate(max_image_pixels=2_000_000)
    counted = tally(replay(records, chosen))
    photo = chosen.price(PHOTO)
    assert counted.decisions == Counter({Decision.ADMIT: 2, Decision.REJECT: 2})
    assert counted.reasons == Counter(
        {Reason.WITHIN_BUDGET: 2, Reason.MAX_IMAGE_PIXELS: 1, "invalid_body": 1}
    )
    assert counted.kv_bytes == Counter({photo.kv_bytes: 2})  # the refused ones forward nothing
    assert counted.visual_tokens == Counter({photo.visual_tokens: 2})
    assert counted.images == 4  # as sent, in priced requests
    assert counted.waits == Counter()


def test_tally_counts_images_shrunk_in_forwarded_requests() -> None:
    chosen = candidate(max_image_pixels=2_000_000, over_budget_action="downscale")
    counted = tally(replay([record(0, BIG), record(1, TEXT)], chosen))
    assert counted.decisions == Counter({Decision.DOWNSCALE: 1, Decision.ADMIT: 1})
    assert counted.downscaled_images == 1


def test_tally_moves_the_ledgers_requests_to_wait_or_429_and_drops_refused_costs() -> None:
    budget = candidate().price(PHOTO).kv_bytes
    records = [
        record(0, PHOTO, held=2.0),
        record(1, PHOTO, arrival=0.5, held=1.0),
        record(2, PHOTO, arrival=0.6, held=1.0),
    ]
    chosen = candidate(kv_budget_bytes=budget, max_queue_depth=1)
    result = replay(records, chosen)
    counted = tally(result)
    assert counted.decisions == Counter({Decision.ADMIT: 1, Decision.WAIT: 1, Decision.REJECT: 1})
    assert counted.reasons == Counter(
        {Reason.WITHIN_BUDGET: 1, Reason.KV_BUDGET_FULL: 1, Reason.QUEUE_FULL: 1}
    )
    assert counted.kv_bytes == Counter({budget: 2})
    assert counted.waits == Counter({result.outcomes[1].wait_seconds: 1})
    assert result.outcomes[1].wait_seconds > 0


def test_tally_counts_a_held_admit_and_a_held_downscale_as_their_outcomes_do() -> None:
    # Downscales and admits queue behind each other: each counted column by column must be
    # what ``outcomes`` (the replay's rule for one request) says of it.
    chosen = candidate(max_image_pixels=2_000_000, over_budget_action="downscale")
    budget = max(chosen.price(BIG).kv_bytes, chosen.price(PHOTO).kv_bytes)
    chosen = candidate(
        max_image_pixels=2_000_000, over_budget_action="downscale", kv_budget_bytes=budget
    )
    costs = [BIG, PHOTO, BIG, PHOTO, TEXT, BIG]
    records = [record(n, cost, arrival=n * 0.1, held=2.0) for n, cost in enumerate(costs)]
    result = replay(records, chosen)
    counted = tally(result)
    one_by_one = result.outcomes
    assert counted.decisions == Counter(outcome.decision for outcome in one_by_one)
    assert counted.reasons == Counter(outcome.reason for outcome in one_by_one)
    held = {(o.decision, o.reason) for o in one_by_one if o.wait_seconds > 0}
    assert (Decision.WAIT, Reason.KV_BUDGET_FULL) in held  # an admit that waited
    assert any(decision is Decision.DOWNSCALE for decision, _ in held)  # stays a downscale
