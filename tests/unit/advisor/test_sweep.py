"""advisor.sweep, with advisor.recommend, replay and report, over a small traffic."""

from __future__ import annotations

import io

from sidecar.advisor.recommend import advice_json, env_block, helm_values, print_advice
from sidecar.advisor.records import RecordedCost, TrafficRecord
from sidecar.advisor.replay import replay
from sidecar.advisor.report import percentiles, print_report, summarize, weighted_percentiles
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.advisor.sweep import Point, advise, pareto_front
from sidecar.settings import Settings
from tests.support.sidecars import QWEN

BASE = Settings(model=QWEN)
GIB = 2**30
SIZES = [(1920, 1080)] * 12 + [(640, 480)] * 6 + [(4032, 3024)] * 2


def traffic() -> list[TrafficRecord]:
    records = []
    for number, (width, height) in enumerate(SIZES):
        cost = RecordedCost(((width, height, "jpeg", "data"),), 23, False, 256, 256)
        priced = Candidate(BASE).price(cost)
        records.append(
            TrafficRecord(
                f"r{number}",
                number * 0.1,
                "chat_completions",
                QWEN,
                "admit",
                "within_budget",
                0.0,
                2.0,
                2.0,
                cost,
                priced.visual_tokens,
                priced.prompt_tokens,
                priced.kv_bytes,
            )
        )
    refused = TrafficRecord(
        "bad", 9.0, "chat_completions", QWEN, "reject", "invalid_body", 0.0, 0.01, None, None
    )
    return [*records, refused]


def point(saved: int, downscaled: float, rejected: int, *knobs: int | None) -> Point:
    pixels, tokens, visual = (*knobs, None, None, None)[:3]
    return Point(pixels, tokens, visual, 10, rejected, 100, 100, saved, downscaled, 5)


def test_percentiles_are_nearest_rank() -> None:
    assert percentiles(list(range(1, 101))) == {"p50": 50, "p95": 95, "p99": 99}
    assert percentiles([]) == {"p50": 0, "p95": 0, "p99": 0}
    # Values with how often each occurs: nearest rank over the 100 they stand for.
    assert weighted_percentiles({3: 5, 1: 50, 2: 45}) == {"p50": 1, "p95": 2, "p99": 3}
    assert weighted_percentiles({7: 1}) == {"p50": 7, "p95": 7, "p99": 7}


def test_the_front_drops_dominated_points_and_keeps_the_simplest_of_equals() -> None:
    simple, same = point(10, 0.1, 0, 4096), point(10, 0.1, 0, 4096, 2048)
    front = pareto_front([point(0, 0.0, 0), simple, same, point(5, 0.2, 0), point(20, 0.1, 3)])
    assert front == [point(0, 0.0, 0), simple, point(20, 0.1, 3)]


def test_replay_reports_queueing_under_a_small_in_flight_budget() -> None:
    records = traffic()
    budget = 3 * records[0].kv_bytes
    candidate = Candidate(with_settings(BASE, kv_budget_bytes=budget, queue_timeout_seconds=1))
    result = replay(records, candidate)
    summary = summarize(records, result, ["a note"])
    assert summary["requests"] == len(records)
    decisions = summary["decisions"]
    assert decisions["wait"] > 0
    assert decisions["reject"] == 1 + summary["queue"]["status_429"] + 2  # refused, 429, 413
    assert summary["queue"]["larger_than_kv_budget"] == 2
    assert summary["peak_inflight_kv_bytes"] <= budget
    out = io.StringIO()
    print_report(summary, out)
    assert "note: a note" in out.getvalue()
    assert "429" in out.getvalue()


def test_advise_in_forked_processes_is_advise_in_one() -> None:
    alone = advise(traffic(), BASE, pool_bytes=50 * GIB, target_downscaled_fraction=0.1)
    spread = advise(traffic(), BASE, pool_bytes=50 * GIB, target_downscaled_fraction=0.1, jobs=3)
    assert spread == alone


def test_advise_recommends_the_most_kv_saved_within_the_target() -> None:
    advice = advise(traffic(), BASE, pool_bytes=50 * GIB, target_downscaled_fraction=0.1)
    best = advice.recommended
    assert best.images_downscaled_fraction <= 0.1
    assert best.rejected == 0
    assert best.kv_saved_per_request > 0  # the two 12 MP photos shrink
    assert all(
        p.kv_saved_per_request <= best.kv_saved_per_request
        for p in advice.front
        if p.rejected == 0 and p.images_downscaled_fraction <= 0.1
    )
    assert best.max_concurrency == 50 * GIB // best.kv_mean_bytes
    assert advice.kv_budget_bytes == int(50 * GIB * 0.9)
    env = env_block(advice)
    assert env["SIDECAR_KV_BUDGET_BYTES"] == str(advice.kv_budget_bytes)
    helm = helm_values(advice)
    assert helm["images"]["maxPixels"] == best.max_pixels
    assert helm["sidecar"]["config"]["kv_budget_bytes"] == advice.kv_budget_bytes
    if best.max_image_tokens or best.max_request_visual_tokens:
        assert env["SIDECAR_OVER_BUDGET_ACTION"] == "downscale"
    assert advice_json(advice)["recommended"]["kv_saved_per_request"] == best.kv_saved_per_request
    out = io.StringIO()
    print_advice(advice, out)
    assert "Helm values:" in out.getvalue()
    assert "* recommended" in out.getvalue()


def test_a_stricter_target_saves_less() -> None:
    loose = advise(traffic(), BASE, pool_bytes=50 * GIB, target_downscaled_fraction=0.9)
    strict = advise(traffic(), BASE, pool_bytes=50 * GIB, target_downscaled_fraction=0.0)
    assert strict.recommended.images_downscaled_fraction == 0.0
    assert loose.recommended.kv_saved_per_request > strict.recommended.kv_saved_per_request
