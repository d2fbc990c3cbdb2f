"""The ``tokens`` and ``plan`` commands, including the ``tokens --json`` contract."""

from __future__ import annotations

import io
import subprocess
import sys

import orjson
import pytest

from sidecar.cli.commands import main

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out)
    return status, out.getvalue()


def test_tokens_json_prints_one_object_per_input_with_the_contract_keys() -> None:
    status, text = _run("tokens", "--model", QWEN, "--json", "224x224", "4032x3024")
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
    status, text = _run("tokens", "--model", QWEN, "--json", "64x64", "100x30000")
    rows = [orjson.loads(line) for line in text.splitlines()]
    assert status == 1
    assert set(rows[1]) == {"input", "error"}
    assert "aspect ratio" in rows[1]["error"]


@pytest.mark.parametrize(
    ("flags", "tokens"),
    [([], 15_552), (["--max-pixels", "1003520"], 1_230)],
    ids=["shipped", "capped"],
)
def test_tokens_applies_the_max_pixels_override(flags: list[str], tokens: int) -> None:
    _, text = _run("tokens", "--model", QWEN, "--json", *flags, "4032x3024")
    assert orjson.loads(text)["tokens"] == tokens


def test_tokens_fp8_kv_cache_halves_kv_bytes() -> None:
    _, text = _run("tokens", "--model", QWEN, "--json", "--kv-cache-dtype", "fp8", "224x224")
    assert orjson.loads(text)["kv_bytes"] == 64 * 28_672


def test_tokens_table_is_readable() -> None:
    status, text = _run("tokens", "--model", QWEN, "1024x1024")
    assert status == 0
    assert "1,369" in text
    assert "74.9 MiB" in text


def test_unknown_model_exits_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    status, _ = _run("tokens", "--model", "nope/nope", "10x10")
    assert status == 2
    assert "unknown model" in capsys.readouterr().err


def test_plan_prints_the_worksheet_side_by_side() -> None:
    status, text = _run(
        "plan",
        "--model",
        QWEN,
        "--images",
        "4",
        "--image-size",
        "4032x3024",
        "--text-tokens",
        "300",
        "--output-tokens",
        "500",
        "--concurrency",
        "32",
    )
    assert status == 0
    for figure in ("63,016", "5,728", "107.7 GiB", "9.8 GiB", "32,768"):
        assert figure in text


def test_plan_json_carries_every_row() -> None:
    _, text = _run(
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


def test_demo_prints_what_the_sidecar_decided_for_the_mixed_workload() -> None:
    status, text = _run("demo", "--once", "--port", "0", "--metrics-port", "0")
    assert status == 0
    assert "NOT vLLM" in text
    rows = {line.split("  ")[0]: line for line in text.splitlines()}
    assert " downscale " in rows["4032x3024 phone photo"]
    assert " downscale " in rows["3840x2160 4K frame"]
    assert " admit " in rows["1920x1080 frame"]
    assert " 400 " in rows["corrupt payload"]
    assert "SIDECAR_MAX_IMAGES_PER_REQUEST is 4" in rows["6 images"]
    assert "cannot be rewritten" in rows["remote URL"]


def test_serve_print_config_prints_the_effective_settings_and_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIDECAR_MODEL", QWEN)
    monkeypatch.setenv("SIDECAR_KV_BUDGET_BYTES", "2GiB")
    monkeypatch.setenv("SIDECAR_MAX_PIXELS", "1003520")
    status, text = _run("serve", "--print-config")
    settings = orjson.loads(text[: text.rindex("}") + 1])
    assert status == 0
    assert settings["kv_budget_bytes"] == 2 * 2**30
    assert settings["max_pixels"] == 1_003_520
    assert "within [3,136, 1,003,520] px" in text


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"SIDECAR_MODEL": QWEN, "SIDECAR_MAX_REQUEST_KV_BYTES": "lots"},
         "SIDECAR_MAX_REQUEST_KV_BYTES"),
        ({"SIDECAR_MODEL": QWEN, "SIDECAR_PORT": "-1"}, "SIDECAR_PORT"),
        ({}, "SIDECAR_MODEL: Field required"),
        ({"SIDECAR_MODEL": "nope/nope"}, "unknown model"),
    ],
    ids=["bad-size", "bad-port", "no-model", "unknown-model"],
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
    status, _ = _run("serve", "--print-config")
    assert status == 2
    assert message in capsys.readouterr().err
