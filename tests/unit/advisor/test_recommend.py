"""advisor.recommend: the env block and the Helm values set the same budgets, and the printed
advice shows the front, the recommendation and what to paste."""

from __future__ import annotations

import io

from sidecar.advisor.recommend import advice_json, env_block, helm_values, print_advice
from tests.support.advice import BASELINE, RECOMMENDED, advice


def test_env_block_sets_the_recommended_budgets_downscaling_and_the_in_flight_budget() -> None:
    assert env_block(advice()) == {
        "SIDECAR_MAX_PIXELS": "1003520",
        "SIDECAR_MAX_IMAGE_TOKENS": "1280",
        "SIDECAR_MAX_REQUEST_VISUAL_TOKENS": "4096",
        "SIDECAR_OVER_BUDGET_ACTION": "downscale",
        "SIDECAR_KV_BUDGET_BYTES": str(9 * 2**30),
    }


def test_helm_values_set_what_the_env_block_sets() -> None:
    env, values = env_block(advice()), helm_values(advice())
    assert values["images"] == {"maxPixels": int(env["SIDECAR_MAX_PIXELS"])}
    config = values["sidecar"]["config"]
    assert {f"SIDECAR_{name.upper()}": str(value) for name, value in config.items()} == {
        name: value for name, value in env.items() if name != "SIDECAR_MAX_PIXELS"
    }


def test_the_models_defaults_set_nothing_but_the_in_flight_budget() -> None:
    plain = advice(recommended=BASELINE, kv_budget_bytes=0)
    assert env_block(plain) == {}
    assert helm_values(plain) == {"images": {"maxPixels": None}, "sidecar": {"config": {}}}


def test_advice_json_carries_the_front_the_recommendation_and_the_notes() -> None:
    document = advice_json(advice(notes=("a note",)))
    assert document["points"] == 4
    assert [row["kv_saved_per_request"] for row in document["pareto"]] == [
        0,
        60 * 2**20,
        90 * 2**20,
    ]
    assert document["recommended"]["max_pixels"] == RECOMMENDED.max_pixels
    assert document["env"] == env_block(advice())
    assert document["notes"] == ["a note"]


def test_print_advice_marks_the_recommendation_and_prints_what_to_paste() -> None:
    out = io.StringIO()
    print_advice(advice(notes=("the saturation gate is not simulated",)), out)
    text = out.getvalue()
    assert "4 candidates, 3 on the Pareto front" in text
    marked_rows = [
        line
        for line in text.splitlines()
        if line.startswith("* ") and not line.startswith("* recommended:")
    ]
    (marked,) = marked_rows  # one row of the front, the recommendation's
    assert "1,003,520" in marked
    assert "  90% of the pool" in text
    assert "3 waited, 1 got 429" in text
    for name, value in env_block(advice()).items():
        assert f"  {name}={value}\n" in text
    assert "images:\n  maxPixels: 1003520\n" in text
    assert "    over_budget_action: downscale\n" in text
    assert text.endswith("note: the saturation gate is not simulated\n")
