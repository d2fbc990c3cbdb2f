"""cli.tables: what ``tokens`` and ``plan`` print for a person to read."""

from __future__ import annotations

from tests.support.cli import run_cli
from tests.support.sidecars import QWEN


def test_tokens_table_is_readable() -> None:
    status, text = run_cli("tokens", "--model", QWEN, "1024x1024")
    assert status == 0
    assert "1,369" in text
    assert "74.9 MiB" in text
    assert "KV block" not in text  # an attention-only model's KV is per token


def test_tokens_table_gives_a_hybrids_block_and_per_request_state() -> None:
    # Qwen3.5-27B with prefix caching: 2 blocks in each of 3 Gated DeltaNet groups (Triton's
    # GDN prefill), 3 with FlashInfer's, assumed by default (docs/kv-geometry.md).
    status, text = run_cli(
        "tokens", "--model", "Qwen/Qwen3.5-27B", "1024x1024", "--gdn-prefill-backend", "triton"
    )
    assert status == 0
    assert "KV block: 784 tokens, 49 MiB; every request also holds 6 recurrent-state" in text
    status, text = run_cli("tokens", "--model", "Qwen/Qwen3.5-27B", "1024x1024")
    assert "KV block: 832 tokens, 52 MiB; every request also holds 9 recurrent-state" in text


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
