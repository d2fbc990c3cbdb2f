"""``tokens`` and ``plan`` with pipeline and data parallelism: the worked numbers of
docs/deploy/parallelism.md."""

from __future__ import annotations

import orjson
import pytest

from sidecar.cli.capacity import Hardware, Workload, make_plan
from sidecar.profiles import load_profile
from sidecar.units import format_bytes
from tests.support.cli import run_cli

QWEN72B = "Qwen/Qwen2.5-VL-72B-Instruct"
FLAGS = ["--tensor-parallel-size", "4", "--pipeline-parallel-size", "2"]


def test_tokens_json_gives_the_busiest_stages_kv_per_gpu_and_keeps_its_keys() -> None:
    status, text = run_cli(
        "tokens", "--model", QWEN72B, *FLAGS, "--data-parallel-size", "2", "--json", "1920x1080"
    )
    (row,) = [orjson.loads(line) for line in text.splitlines()]
    assert status == 0
    assert set(row) == {"input", "width", "height", "tokens", "wrapper_tokens", "kv_bytes"}
    # 40 layers on each stage, 2 of the 8 KV heads per GPU: 40 KiB per token.
    assert row["kv_bytes"] == 2_691 * 40 * 2 * 2 * 128 * 2
    assert format_bytes(row["kv_bytes"]) == "105.1 MiB"


def test_tokens_table_names_the_split() -> None:
    _, text = run_cli("tokens", "--model", QWEN72B, *FLAGS, "--data-parallel-size", "2", "64x64")
    assert "KV per token: 40 KiB" in text
    assert "pipeline stages of 40/40 layers; 2 data-parallel engine(s)" in text


def _worked_plan() -> tuple[dict[str, object], dict[str, object]]:
    _, text = run_cli(
        "plan", "--model", QWEN72B, "--images", "4", "--image-size", "1920x1080",
        "--text-tokens", "300", "--output-tokens", "500", "--concurrency", "64",
        "--gpu-memory-gib", "80", "--gpus", "4", "--pipeline-parallel-size", "2",
        "--data-parallel-size", "2", "--json",
    )  # fmt: skip
    plan = orjson.loads(text)
    return plan, plan["rows"][0]


def test_plan_worked_example_tp4_pp2_dp2_on_80_gib_gpus() -> None:
    plan, uncapped = _worked_plan()
    assert plan["stage_layers"] == [40, 40]
    assert format_bytes(plan["weights_bytes_per_gpu"]) == "17.1 GiB"  # half the layers, / TP 4
    assert format_bytes(plan["kv_pool_bytes_per_gpu"]) == "55.0 GiB"
    assert format_bytes(plan["kv_bytes_per_token"]) == "40 KiB"
    assert format_bytes(plan["auto_kv_budget_bytes"]) == "110.0 GiB"  # both engines' pools
    assert uncapped["tokens_per_request"] == 11_572
    assert format_bytes(uncapped["kv_bytes_per_request"]) == "452.5 MiB"
    # 64 requests over 2 engines: 32 each in flight, 14.1 GiB per GPU of an engine.
    assert uncapped["kv_tokens_in_flight"] == 32 * 11_572
    assert format_bytes(uncapped["kv_bytes_in_flight"]) == "14.1 GiB"
    assert uncapped["max_concurrency"] == 2 * 124


def test_plan_without_parallelism_is_unchanged() -> None:
    workload = Workload(4, 4032, 3024, text_tokens=300, output_tokens=500, concurrency=32)
    plain = make_plan(load_profile("Qwen/Qwen2.5-VL-7B-Instruct"), [("p", workload)], Hardware(80))
    assert plain.stage_layers == (28,)
    assert plain.auto_kv_budget_bytes == plain.kv_pool_bytes_per_gpu
    assert format_bytes(plain.rows[0].kv_bytes_in_flight) == "107.7 GiB"


@pytest.mark.parametrize(
    ("pp", "stages", "share"), [(3, (27, 27, 26), 27 / 80), (4, (20,) * 4, 0.25)]
)
def test_plan_weights_per_gpu_are_the_busiest_stages_share(
    pp: int, stages: tuple[int, ...], share: float
) -> None:
    profile = load_profile(QWEN72B)
    workload = Workload(1, 640, 480, text_tokens=10, output_tokens=10, concurrency=1)
    plan = make_plan(
        profile, [("x", workload)], Hardware(80, gpu_count=2, pipeline_parallel_size=pp)
    )
    assert plan.stage_layers == stages
    assert profile.parameter_count is not None
    expected = profile.parameter_count * 2 * share / 2
    assert abs(plan.weights_bytes_per_gpu - expected) < 2


def test_tokens_and_plan_take_vllms_layer_partition(capsys: pytest.CaptureFixture[str]) -> None:
    partition = ["--pipeline-layer-partition", "42,38"]
    _, text = run_cli("tokens", "--model", QWEN72B, *FLAGS, *partition, "64x64")
    assert "KV per token: 42 KiB" in text
    assert "pipeline stages of 42/38 layers" in text
    status, text = run_cli(
        "plan", "--model", QWEN72B, "--gpu-memory-gib", "80", "--gpus", "4",
        "--pipeline-parallel-size", "2", *partition, "--json",
    )  # fmt: skip
    assert status == 0
    # vLLM refuses a partition that does not cover the layers, and so does the sidecar.
    capsys.readouterr()
    status, _ = run_cli(
        "tokens", "--model", QWEN72B, *FLAGS, "--pipeline-layer-partition", "40,39", "x"
    )
    assert status != 0
    assert "layer partition 40,39" in capsys.readouterr().err
