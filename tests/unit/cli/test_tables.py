"""cli.tables: what ``tokens`` and ``plan`` print for a person to read."""

from __future__ import annotations

from tests.support.cli import run_cli
from tests.support.sidecars import QWEN


def test_tokens_table_is_readable() -> None:
    status, text = run_cli("tokens", "--model", QWEN, "1024x1024")
    assert status == 0
    assert "1,369" in text
    assert "74.9 MiB" in text


def test_plan_prints_the_worksheet_side_by_side() -> None:
    status, text = run_cli(
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
