"""KV geometry: bytes per token and per request, in whole vLLM blocks."""

from __future__ import annotations

import pytest

from sidecar.kv_geometry import AttentionKind, KvGeometry, LayerGroup

QWEN7B = KvGeometry((LayerGroup(AttentionKind.FULL, 28, 4, 128),), dtype_bytes=2)


@pytest.mark.parametrize(
    ("tokens", "blocks"),
    [(0, 0), (1, 1), (16, 1), (17, 2), (63_016, 3_939)],
    ids=["empty", "one", "full-block", "spill", "worksheet"],
)
def test_request_kv_bytes_rounds_up_to_whole_blocks(tokens: int, blocks: int) -> None:
    assert QWEN7B.request_kv_bytes(tokens) == blocks * 16 * 57_344


def test_request_kv_bytes_follows_the_block_size() -> None:
    geometry = KvGeometry(QWEN7B.layer_groups, dtype_bytes=2, block_size_tokens=32)
    assert geometry.request_kv_bytes(33) == 64 * 57_344


def test_sliding_window_layers_hold_at_most_their_window() -> None:
    geometry = KvGeometry(
        (
            LayerGroup(AttentionKind.FULL, 1, 1, 128),
            LayerGroup(AttentionKind.SLIDING_WINDOW, 5, 1, 128, window_tokens=1024),
        ),
        dtype_bytes=2,
    )
    full_per_token, sliding_per_token = 512, 5 * 512
    short = geometry.request_kv_bytes(100)
    assert short == 7 * 16 * (full_per_token + sliding_per_token)
    long = geometry.request_kv_bytes(100_000)
    assert long == 6_250 * 16 * full_per_token + (64 + 1) * 16 * sliding_per_token


def test_cross_attention_layers_hold_encoder_states_not_prompt_tokens() -> None:
    geometry = KvGeometry(
        (
            LayerGroup(AttentionKind.FULL, 2, 1, 64),
            LayerGroup(AttentionKind.CROSS, 1, 1, 64),
        ),
        dtype_bytes=2,
    )
    assert geometry.bytes_per_token == 2 * 2 * 64 * 2
    assert geometry.request_kv_bytes(16, cross_attention_tokens=32) == 16 * 512 + 32 * 256


def test_unknown_layer_types_count_as_full_attention() -> None:
    assert AttentionKind.from_layer_type("linear_attention") is AttentionKind.FULL
