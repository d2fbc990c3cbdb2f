"""Traffic records built in code, for replay tests: costs, records and the candidate to replay
them under (virtual time: each record's arrival and service time are given)."""

from __future__ import annotations

from typing import Any

from sidecar.advisor.records import RecordedCost, TrafficRecord
from sidecar.advisor.repricing import Candidate
from sidecar.settings import Settings
from tests.support.sidecars import QWEN

# A 1280x960 inline photo with a short prompt, and a text-only request.
PHOTO = RecordedCost(
    images=((1280, 960, "jpeg", "data"),),
    text_tokens=40,
    text_exact=False,
    output_tokens=256,
    output_requested=256,
)
TEXT = RecordedCost(
    images=(), text_tokens=40, text_exact=False, output_tokens=16, output_requested=16
)


def record(
    number: int,
    cost: RecordedCost | None,
    *,
    arrival: float = 0.0,
    held: float | None = 1.0,
    decision: str = "admit",
    reason: str = "within_budget",
) -> TrafficRecord:
    """A chat request arriving at ``arrival`` s and served in ``held`` s (None: never sent)."""
    return TrafficRecord(
        f"r{number}", arrival, "chat_completions", QWEN, decision, reason, 0.0, 1.0, held, cost
    )


def candidate(**settings: Any) -> Candidate:
    return Candidate(Settings(model=QWEN, **settings))
