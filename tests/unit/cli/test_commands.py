"""cli.commands: ``tokens`` and its ``--json`` contract, ``plan --json``, ``serve --print-config``
and its start-up refusals, ``python -m sidecar``.

The tables printed for people: ``test_tables.py``; the demo: ``test_demo.py``.
"""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from tests.support.cli import run_cli
from tests.support.sidecars import QWEN


def test_tokens_json_prints_one_object_per_input_with_the_contract_keys() -> None:
    status, text = run_cli("tokens", "--model", QWEN, "--json", "224x224", "4032x3024")
    rows = [orjson.loads(line) for line in text.splitlines()]
    assert status == 0
    assert rows == [
        {
            "input": "224x224",
            "width": 224,
            "height": 224,
            "tokens": 64,
            "wrapper_tokens": 2,
            "kv_bytes": 64 * 57_344,
        },
        {
            "input": "4032x3024",
            "width": 4032,
            "height": 3024,
            "tokens": 15_552,
            "wrapper_tokens": 2,
            "kv_bytes": 15_552 * 57_344,
        },
    ]


def test_tokens_json_reports_refused_sizes_as_errors_and_exits_1() -> None:
    status, text = run_cli("tokens", "--model", QWEN, "--json", "64x64", "100x30000")
    rows = [orjson.loads(line) for line in text.splitlines()]
    assert status == 1
    assert set(rows[1]) == {"input", "error"}
    assert "aspect ratio" in rows[1]["error"]


def test_tokens_prints_vllms_refusal_of_an_image_above_its_pixel_limit() -> None:
    status, text = run_cli("tokens", "--model", QWEN, "--json", "15000x12000", "13000x13000")
    rows = [orjson.loads(line) for line in text.splitlines()]
    assert status == 1
    assert rows[0] == {
        "input": "15000x12000",
        "error": "Image dimensions 15000x12000 (180000000 pixels) exceed the maximum of "
        "178956970 pixels. Set VLLM_MAX_IMAGE_PIXELS to increase this limit.",
    }
    assert rows[1]["tokens"] == 16_384  # 169,000,000 pixels: under the limit, priced at max_pixels


@pytest.mark.parametrize(
    ("flags", "tokens"),
    [([], 15_552), (["--max-pixels", "1003520"], 1_230)],
    ids=["shipped", "capped"],
)
def test_tokens_applies_the_max_pixels_override(flags: list[str], tokens: int) -> None:
    _, text = run_cli("tokens", "--model", QWEN, "--json", *flags, "4032x3024")
    assert orjson.loads(text)["tokens"] == tokens


@pytest.mark.parametrize(
    ("flags", "tokens"),
    [([], 15_552), (["--mm-processor-kwargs", '{"max_pixels": 1003520}'], 1_230)],
    ids=["shipped", "capped"],
)
def test_tokens_takes_vllms_mm_processor_kwargs(flags: list[str], tokens: int) -> None:
    _, text = run_cli("tokens", "--model", QWEN, "--json", *flags, "4032x3024")
    assert orjson.loads(text)["tokens"] == tokens


def test_tokens_refuses_mm_processor_kwargs_that_are_not_a_json_object(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        run_cli("tokens", "--model", QWEN, "--mm-processor-kwargs", "[1]", "224x224")
    assert "expected a JSON object" in capsys.readouterr().err


def test_tokens_fp8_kv_cache_halves_kv_bytes() -> None:
    _, text = run_cli("tokens", "--model", QWEN, "--json", "--kv-cache-dtype", "fp8", "224x224")
    assert orjson.loads(text)["kv_bytes"] == 64 * 28_672


def test_unknown_model_exits_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    status, _ = run_cli("tokens", "--model", "nope/nope", "10x10")
    assert status == 2
    assert "unknown model" in capsys.readouterr().err


def test_plan_json_carries_every_row() -> None:
    _, text = run_cli(
        "plan",
        "--model",
        QWEN,
        "--image-size",
        "1920x1080",
        "--p99-image-size",
        "3840x2160",
        "--json",
    )
    plan = orjson.loads(text)
    assert [row["label"] for row in plan["rows"]] == [
        "p50 uncapped",
        "p50 capped",
        "p99 uncapped",
        "p99 capped",
    ]


def test_python_dash_m_sidecar_runs_the_cli() -> None:
    result = subprocess.run(  # noqa: S603 - fixed argv, our own module
        [sys.executable, "-m", "sidecar", "tokens", "--model", QWEN, "--json", "224x224"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert orjson.loads(result.stdout)["tokens"] == 64


def test_serve_print_config_prints_the_effective_settings_and_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIDECAR_MODEL", QWEN)
    monkeypatch.setenv("SIDECAR_KV_BUDGET_BYTES", "2GiB")
    monkeypatch.setenv("SIDECAR_MAX_PIXELS", "1003520")
    status, text = run_cli("serve", "--print-config")
    settings = orjson.loads(text[: text.rindex("}") + 1])
    assert status == 0
    assert settings["kv_budget_bytes"] == 2 * 2**30
    assert settings["max_pixels"] == 1_003_520
    assert "within [3,136, 1,003,520] px" in text


@pytest.mark.parametrize(("written", "read"), [("10, 18", [10, 18]), ("", [])])
def test_serve_reads_vllms_layer_partition(
    monkeypatch: pytest.MonkeyPatch, written: str, read: list[int]
) -> None:
    for name, value in (("MODEL", QWEN), ("PIPELINE_PARALLEL_SIZE", "2")):
        monkeypatch.setenv(f"SIDECAR_{name}", value)
    monkeypatch.setenv("SIDECAR_PIPELINE_LAYER_PARTITION", written)
    status, text = run_cli("serve", "--print-config")
    assert status == 0
    assert orjson.loads(text[: text.rindex("}") + 1])["pipeline_layer_partition"] == read


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"SIDECAR_MODEL": QWEN, "SIDECAR_MAX_REQUEST_KV_BYTES": "lots"},
         "SIDECAR_MAX_REQUEST_KV_BYTES"),
        ({"SIDECAR_MODEL": QWEN, "SIDECAR_PORT": "-1"}, "SIDECAR_PORT"),
        ({}, "SIDECAR_MODEL: Field required"),
        ({"SIDECAR_MODEL": "nope/nope"}, "unknown model"),
        ({"SIDECAR_MODEL": QWEN, "SIDECAR_PIPELINE_LAYER_PARTITION": "14,x"},
         "SIDECAR_PIPELINE_LAYER_PARTITION"),
        ({"SIDECAR_MODEL": QWEN, "SIDECAR_PIPELINE_PARALLEL_SIZE": "2",
          "SIDECAR_PIPELINE_LAYER_PARTITION": "14,15"}, "layer partition 14,15"),
    ],
    ids=["bad-size", "bad-port", "no-model", "unknown-model", "bad-partition",
         "partition-not-the-layers"],
)  # fmt: skip
def test_serve_refuses_invalid_settings_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    environment: dict[str, str],
    message: str,
) -> None:
    monkeypatch.delenv("SIDECAR_MODEL", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    status, _ = run_cli("serve", "--print-config")
    assert status == 2
    assert message in capsys.readouterr().err
