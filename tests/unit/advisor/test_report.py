"""advisor.report: the summary, counted per distinct answer, is the summary counted request by
request from ``ReplayResult.outcomes``, on random traffic under random budgets and queues."""

from __future__ import annotations

import io
import random
from collections import Counter
from typing import Any

import pytest

from sidecar.admission.decision import Decision
from sidecar.admission.discipline import DEFAULT_CLASS, PriorityPolicy, QueueTags, classify
from sidecar.advisor.records import RecordedCost, TrafficRecord
from sidecar.advisor.replay import FATE_REASONS, ReplayResult, replay
from sidecar.advisor.report import percentiles, print_report, summarize
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.settings import Settings
from tests.support.random_traffic import random_cost, random_settings
from tests.support.sidecars import QWEN

REFUSALS = [("reject", "invalid_body"), ("reject", "invalid_image"), ("admit", "within_budget")]


def random_traffic(rng: random.Random) -> list[TrafficRecord]:
    """Requests arriving close together (so that a small in-flight budget queues them), a
    tenth refused before pricing, a few costs repeated, some never forwarded when recorded."""
    costs = [random_cost(rng) for _ in range(12)]
    records, arrival = [], 0.0
    for number in range(rng.randint(1, 120)):
        arrival += rng.choice((0.0, 0.05, 0.3))
        cost: RecordedCost | None = rng.choice(costs) if rng.random() < 0.9 else None
        decision, reason = rng.choice(REFUSALS) if cost is None else ("admit", "within_budget")
        held = None if rng.random() < 0.1 else rng.choice((0.2, 1.0, 4.0))
        records.append(
            TrafficRecord(
                f"r{number}",
                arrival,
                "chat_completions",
                QWEN,
                decision,
                reason,
                0.0,
                1.0,
                held,
                cost,
                rng.randint(0, 900),
                rng.randint(0, 9000),
                rng.randint(0, 10**9),
                rng.choice((None, None, "chat", "batch")),
                None,
                rng.choice(("", "a", "b")),
            )
        )
    return records


def queueing_settings(rng: random.Random) -> Settings:
    """Random budgets, with an in-flight budget small enough to queue some of the time."""
    return with_settings(
        random_settings(rng),
        kv_budget_bytes=rng.choice((0, 2**28, 2**29, 2**30)),
        queue_timeout_seconds=rng.choice((0, 1, 30)),
        max_queue_depth=rng.choice((1, 4, 1000)),
        mode=rng.choice(("enforce", "enforce", "shadow")),
        objective_priorities=rng.choice(("", "chat=10,batch=-1")),
        fairness=rng.random() < 0.7,
    )


def request_by_request(
    records: list[TrafficRecord], result: ReplayResult, settings: Settings
) -> dict[str, Any]:
    """The reference: every outcome looked at on its own."""
    outcomes = result.outcomes
    assert len(outcomes) == len(records)
    forwarded = [
        o.priced for o in outcomes if o.priced is not None and o.decision is not Decision.REJECT
    ]
    waits = [
        o.wait_seconds
        for o in outcomes
        if o.decision is Decision.WAIT or (o.decision is Decision.DOWNSCALE and o.wait_seconds > 0)
    ]
    reasons = Counter(str(o.reason) for o in outcomes)
    priced_records = [r for r in records if r.cost is not None]
    return {
        "requests": len(outcomes),
        "decisions": {d.value: sum(o.decision is d for o in outcomes) for d in Decision},
        "reasons": dict(sorted(reasons.items())),
        "before": {
            name: percentiles([getattr(r, name) for r in priced_records])
            for name in ("visual_tokens", "prompt_tokens", "kv_bytes")
        },
        "visual_tokens_per_request": percentiles([p.visual_tokens for p in forwarded]),
        "prompt_tokens_per_request": percentiles([p.prompt_tokens for p in forwarded]),
        "kv_bytes_per_request": percentiles([p.kv_bytes for p in forwarded]),
        "images": {
            "total": sum(len(r.cost.images) for r in priced_records if r.cost is not None),
            "downscaled": sum(p.downscaled_images for p in forwarded),
        },
        "waited": len(waits),
        "wait_seconds": {**percentiles(waits), "max": max(waits, default=0.0)},
        "status_429": sum(reasons[r.value] for r in FATE_REASONS.values()),
        "bands": bands_by_request(records, result, settings),
    }


def bands_by_request(
    records: list[TrafficRecord], result: ReplayResult, settings: Settings
) -> dict[str, Any]:
    """Per band, from each outcome and its record's class worked out on its own."""
    policy = PriorityPolicy.from_settings(settings)
    classes = [classify(QueueTags(r.objective, r.body_priority, r.tenant), policy) for r in records]
    unqueued = settings.mode == "shadow" or not Candidate(settings).budgets.kv_budget_bytes
    if unqueued or all(c == DEFAULT_CLASS for c in classes):
        return {}  # nothing waits, or everyone is in one band
    bands: dict[str, Any] = {}
    for band in sorted({c.priority for c in classes}, reverse=True):
        mine = [o for o, c in zip(result.outcomes, classes, strict=True) if c.priority == band]
        waits = [
            o.wait_seconds for o in mine if o.wait_seconds > 0 and o.decision is not Decision.REJECT
        ]
        bands[str(band)] = {
            "requests": len(mine),
            "waited": len(waits),
            "wait_seconds": {**percentiles(waits), "max": max(waits, default=0.0)},
            "status_429": sum(o.reason in FATE_REASONS.values() for o in mine),
        }
    return bands


@pytest.mark.parametrize("seed", range(30))
def test_the_summary_counts_what_each_request_got(seed: int) -> None:
    rng = random.Random(seed)
    settings = queueing_settings(rng)
    records = random_traffic(rng)
    result = replay(records, Candidate(settings))
    summary = summarize(records, result)
    expected = request_by_request(records, result, settings)
    queue = summary["queue"]
    got = {
        **{key: summary[key] for key in expected if key in summary},
        "waited": queue["waited"],
        "wait_seconds": queue["wait_seconds"],
        "status_429": queue["status_429"],
    }
    assert got == expected


def test_random_traffic_reaches_every_outcome() -> None:
    """The random settings and traffic above queue, time out, fill the queue and refuse."""
    seen: Counter[str] = Counter()
    for seed in range(30):
        rng = random.Random(seed)
        settings = queueing_settings(rng)
        seen.update(
            str(o.reason) for o in replay(random_traffic(rng), Candidate(settings)).outcomes
        )
        seen.update(
            str(o.decision) for o in replay(random_traffic(rng), Candidate(settings)).outcomes
        )
    for name in ("wait", "downscale", "queue_timeout", "queue_full", "shed", "invalid_body"):
        assert seen[name] > 0, name


def test_the_printed_report_gives_each_bands_waits_and_429s() -> None:
    for seed in range(100):
        rng = random.Random(seed)
        settings = with_settings(
            queueing_settings(rng),
            mode="enforce",
            kv_budget_bytes=2**29,
            objective_priorities="chat=10,batch=-1",
        )
        records = random_traffic(rng)
        summary = summarize(records, replay(records, Candidate(settings)))
        if summary["bands"].get("-1", {}).get("status_429"):
            break
    else:
        pytest.fail("no random traffic shed a batch request")
    out = io.StringIO()
    print_report(summary, out)
    text = out.getvalue()
    assert "queue by priority band (higher is served first):" in text
    for band, row in summary["bands"].items():
        assert f"band {band:>4}: {row['requests']:,} requests, {row['waited']:,} waited" in text
    assert f"{summary['queue']['shed']:,} shed" in text
