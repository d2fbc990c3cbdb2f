"""advisor.replay: each record re-decided under a candidate, then the in-flight ledger run on
the recorded arrivals and service times (virtual time: waits are exact)."""

from __future__ import annotations

import pytest

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.replay import Outcome, priced_as_recorded, replay
from tests.support.traffic_records import PHOTO, TEXT, candidate, record


def decisions(outcomes: tuple[Outcome, ...]) -> list[tuple[Decision, Reason | str]]:
    return [(outcome.decision, outcome.reason) for outcome in outcomes]


def test_replay_admits_everything_priced_when_no_budget_is_set() -> None:
    records = [record(0, PHOTO), record(1, TEXT), record(2, PHOTO)]
    result = replay(records, candidate())
    assert decisions(result.outcomes) == [(Decision.ADMIT, Reason.WITHIN_BUDGET)] * 3
    assert result.outcomes[0].priced == candidate().price(PHOTO)
    assert result.outcomes[0].priced is result.outcomes[2].priced  # one answer per cost


def test_replay_keeps_the_recorded_answer_of_a_request_refused_before_pricing() -> None:
    records = [record(0, None, held=None, decision="reject", reason="invalid_image")]
    (outcome,) = replay(records, candidate()).outcomes
    assert (outcome.decision, outcome.reason, outcome.priced) == (
        Decision.REJECT, "invalid_image", None,
    )  # fmt: skip


def test_replay_applies_the_candidates_per_request_budgets() -> None:
    records = [record(0, PHOTO), record(1, TEXT)]
    result = replay(records, candidate(max_image_pixels=1_000_000))
    assert decisions(result.outcomes) == [
        (Decision.REJECT, Reason.MAX_IMAGE_PIXELS),
        (Decision.ADMIT, Reason.WITHIN_BUDGET),
    ]


def _budget_for_one_photo() -> int:
    return candidate().price(PHOTO).kv_bytes


def test_replay_makes_a_request_wait_until_the_one_ahead_of_it_finishes() -> None:
    records = [record(0, PHOTO, held=2.0), record(1, PHOTO, arrival=0.5)]
    result = replay(records, candidate(kv_budget_bytes=_budget_for_one_photo()))
    first, second = result.outcomes
    assert (first.decision, first.wait_seconds) == (Decision.ADMIT, 0.0)
    assert (second.decision, second.reason) == (Decision.WAIT, Reason.KV_BUDGET_FULL)
    assert second.wait_seconds == pytest.approx(1.5)


def test_replay_refuses_with_429_when_the_wait_would_outlast_the_queue_timeout() -> None:
    records = [record(0, PHOTO, held=5.0), record(1, PHOTO, arrival=0.1)]
    budget = _budget_for_one_photo()
    result = replay(records, candidate(kv_budget_bytes=budget, queue_timeout_seconds=1))
    assert decisions(result.outcomes)[1] == (Decision.REJECT, Reason.QUEUE_TIMEOUT)


def test_replay_refuses_with_429_when_the_queue_is_full() -> None:
    records = [record(n, PHOTO, arrival=0.01 * n, held=5.0) for n in range(3)]
    budget = _budget_for_one_photo()
    result = replay(records, candidate(kv_budget_bytes=budget, max_queue_depth=1))
    assert decisions(result.outcomes)[1:] == [
        (Decision.WAIT, Reason.KV_BUDGET_FULL),
        (Decision.REJECT, Reason.QUEUE_FULL),
    ]


def test_replay_in_shadow_mode_only_notes_who_would_have_waited() -> None:
    records = [record(0, PHOTO, held=2.0), record(1, PHOTO, arrival=0.5)]
    shadow = candidate(kv_budget_bytes=_budget_for_one_photo(), mode="shadow")
    first, second = replay(records, shadow).outcomes
    assert second.decision is Decision.WAIT
    assert first.wait_seconds == second.wait_seconds == 0.0  # nothing is held back


def test_replay_gives_requests_never_forwarded_the_median_service_time_and_counts_them() -> None:
    records = [
        record(0, PHOTO, held=1.0),
        record(1, PHOTO, held=2.0, arrival=10.0),
        record(2, PHOTO, held=None, arrival=20.0),
        record(3, PHOTO, held=4.0, arrival=20.5),
    ]
    result = replay(records, candidate(kv_budget_bytes=_budget_for_one_photo()))
    assert result.service_time_estimated == 1
    # Request 2 holds the budget for the median of 1, 2 and 4 s; request 3 came 0.5 s later.
    assert result.outcomes[3].wait_seconds == pytest.approx(1.5)


def test_priced_as_recorded_gives_each_record_its_price_under_the_candidate() -> None:
    chosen = candidate()
    priced, refused = priced_as_recorded([record(0, PHOTO), record(1, None)], chosen)
    answer = chosen.price(PHOTO)
    assert (priced.visual_tokens, priced.prompt_tokens, priced.kv_bytes) == (
        answer.visual_tokens, answer.prompt_tokens, answer.kv_bytes,
    )  # fmt: skip
    assert answer.kv_bytes > 0
    assert refused == record(1, None)
