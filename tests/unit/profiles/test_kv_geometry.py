"""profiles.kv_geometry: bytes per token and per request, in whole vLLM blocks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sidecar.profiles import load_profile
from sidecar.profiles.kv_geometry import (
    GDN_PREFILL_CHECKPOINT_TOKENS,
    AttentionKind,
    KvGeometry,
    LayerGroup,
    RecurrentKind,
    RecurrentState,
    default_block_tokens,
)
from sidecar.profiles.model_config import read_text_model, text_config
from sidecar.units import format_bytes
from tests.support.hybrid_models import (
    DEEPSEEK_VL2_SMALL,
    GEMMA4_26B_A4B,
    GEMMA4_31B,
    GEMMA4_E2B,
    GEMMA4_E4B,
    KIMI_K25,
    KIMI_VL_A3B,
    NEMOTRON_NANO_9B_V2,
    QWEN3_5_27B,
    QWEN3_5_35B_A3B,
    hybrid_geometry,
)
from tests.support.paths import ROOT

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


# -- Gemma 3 sliding windows, hybrid padding -------------------------------------------------

GEMMA3_4B = "google/gemma-3-4b-it"
LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def _vllm_sliding_window_peak_blocks(window: int, block: int, sequence: int) -> int:
    """Most blocks vLLM's ``SlidingWindowManager`` holds while a sequence grows to ``sequence``.

    Replays its bookkeeping token by token: before each step ``remove_skipped_blocks`` frees
    the blocks wholly before token ``computed - window + 1`` (``get_num_skipped_tokens``), and
    the step then needs ``ceil((computed + 1) / block)`` blocks counted from the start.
    """
    peak = 0
    for computed in range(sequence):
        skipped_blocks = max(0, computed - window + 1) // block
        peak = max(peak, -(-(computed + 1) // block) - skipped_blocks)
    return peak


@pytest.mark.parametrize(
    ("window", "block"),
    [(1024, 16), (1025, 16), (1040, 16), (4096, 32), (5, 4), (1, 16)],
    ids=["gemma3", "one-past-a-block", "mid-block", "mistral-window", "tiny", "one-token"],
)
def test_sliding_window_layers_hold_vllms_steady_state_blocks(window: int, block: int) -> None:
    group = LayerGroup(AttentionKind.SLIDING_WINDOW, 1, 1, 64, window_tokens=window)
    geometry = KvGeometry((group,), dtype_bytes=2, block_size_tokens=block)
    for sequence in (1, window, window + 1, window + block, 3 * window + 7, 10 * window):
        expected = _vllm_sliding_window_peak_blocks(window, block, sequence)
        assert geometry.held_blocks(group, sequence) == expected, sequence


@pytest.mark.parametrize(
    ("full", "sliding", "allocated"),
    [(5, 29, 30), (8, 40, 40), (10, 52, 60), (13, 12, 13), (1, 5, 5)],
    ids=["gemma3-4b", "gemma3-12b", "gemma3-27b", "gpt-oss-like", "one-global"],
)
def test_hybrid_models_pad_each_attention_kind_to_whole_kv_cache_groups(
    full: int, sliding: int, allocated: int
) -> None:
    sliding_group = LayerGroup(AttentionKind.SLIDING_WINDOW, sliding, 1, 64, window_tokens=512)
    geometry = KvGeometry(
        (LayerGroup(AttentionKind.FULL, full, 1, 64), sliding_group), dtype_bytes=2
    )
    assert geometry.allocated_layers(sliding_group) == allocated
    assert geometry.bytes_per_token == (full + allocated) * 2 * 64 * 2  # full layers unpadded


def test_gemma3_4b_holds_the_window_in_29_sliding_layers_padded_to_30() -> None:
    kv = load_profile(GEMMA3_4B).kv
    groups = {group.kind: group for group in kv.layer_groups}
    full, sliding = groups[AttentionKind.FULL], groups[AttentionKind.SLIDING_WINDOW]
    assert (full.num_layers, sliding.num_layers, sliding.window_tokens) == (5, 29, 1024)
    assert kv.allocated_layers(sliding) == 30  # 6 KV-cache groups of 5 layers
    per_layer = 2 * 4 * 256 * 2  # K and V x 4 KV heads x head_dim 256 x bf16 = 4,096 B
    assert kv.bytes_per_token == (5 + 30) * per_layer == 143_360
    # 10,000 tokens: 625 blocks in the global layers, the steady 65 in the sliding ones.
    long = 625 * 16 * 5 * per_layer + 65 * 16 * 30 * per_layer
    assert kv.request_kv_bytes(10_000) == long == 332_595_200
    # 100 tokens are inside the window: 7 blocks in every layer.
    assert kv.request_kv_bytes(100) == 7 * 16 * 35 * per_layer == 16_056_320


def test_gemma3_27b_pays_for_8_padding_layers() -> None:
    kv = load_profile("google/gemma-3-27b-it").kv
    per_layer = 2 * 16 * 128 * 2  # head_dim 128 on the 27B, 8,192 B
    assert kv.bytes_per_token == (10 + 60) * per_layer == 573_440
    assert kv.request_kv_bytes(10_000) == (625 * 10 + 65 * 60) * 16 * per_layer


def test_llama4_chunked_layers_hold_one_chunk_and_its_nope_layers_every_token() -> None:
    kv = load_profile(LLAMA4).kv
    kinds = {group.kind: group for group in kv.layer_groups}
    assert set(kinds) == {AttentionKind.CHUNKED, AttentionKind.FULL}
    chunked, full = kinds[AttentionKind.CHUNKED], kinds[AttentionKind.FULL]
    assert (chunked.num_layers, chunked.window_tokens, full.num_layers) == (36, 8192, 12)
    block = kv.block_size_tokens
    assert kv.held_blocks(chunked, 100_000) == 8192 // block + 1
    assert kv.held_blocks(full, 100_000) == 100_000 // block
    assert kv.held_blocks(chunked, 1_000) == kv.held_blocks(full, 1_000)


# -- the design brief's KV figures ----------------------------------------------------------

QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN25_VL_72B = "Qwen/Qwen2.5-VL-72B-Instruct"
LLAVA_15_7B = "llava-hf/llava-1.5-7b-hf"


@pytest.mark.parametrize(
    ("model", "per_token"),
    [(QWEN25_VL_7B, "56 KiB"), (QWEN25_VL_72B, "320 KiB"), (LLAVA_15_7B, "512 KiB")],
    ids=["qwen7b", "qwen72b", "llava7b"],
)
def test_kv_bytes_per_token_match_the_brief(model: str, per_token: str) -> None:
    assert format_bytes(load_profile(model).kv.bytes_per_token) == per_token


@pytest.mark.parametrize(
    ("model", "size", "kv"),
    [
        (LLAVA_15_7B, (1024, 1024), "288 MiB"),
        (QWEN25_VL_7B, (1024, 1024), "74.9 MiB"),
        (QWEN25_VL_7B, (3840, 2160), "576.9 MiB"),
        (QWEN25_VL_72B, (3840, 2160), "3.2 GiB"),
    ],
    ids=["llava", "qwen7b-1024", "qwen7b-4k", "qwen72b-4k"],
)
def test_kv_bytes_per_image_match_the_brief(model: str, size: tuple[int, int], kv: str) -> None:
    profile = load_profile(model)
    tokens = profile.vision.image_tokens(*size).tokens
    assert format_bytes(tokens * profile.kv.bytes_per_token) == kv


# Qwen3.5-27B, bf16, one GPU: 16 full-attention layers (4 KV heads of 256: 4,096 bytes a token
# a layer) and 48 Gated DeltaNet layers, each holding a 10,240 x 3 bf16 conv state and a
# 48 x 128 x 128 fp32 temporal state: 3,207,168 bytes a sequence.
QWEN3_5 = hybrid_geometry(QWEN3_5_27B)
QWEN3_5_STATE = next(g.state for g in QWEN3_5.layer_groups if g.state is not None)


def test_recurrent_state_is_per_sequence_in_vllms_shapes() -> None:
    assert QWEN3_5_STATE.shapes(1) == ((10_240, 3), (48, 128, 128))
    assert QWEN3_5.recurrent_state_bytes(QWEN3_5_STATE) == 10_240 * 3 * 2 + 48 * 128 * 128 * 4
    assert QWEN3_5_STATE.shapes(2) == ((5_120, 3), (24, 128, 128))
    with pytest.raises(ValueError, match="divisible"):
        QWEN3_5_STATE.shapes(5)


def test_the_hybrid_block_holds_a_recurrent_state_in_one_attention_page() -> None:
    # 16 x ceil(3,207,168 / (16 x 4,096)) = 784 tokens: a 3,211,264-byte page; 4 groups of 16.
    assert QWEN3_5.block_tokens == 784
    assert QWEN3_5.layers_per_block == 16
    assert QWEN3_5.bytes_per_block == 16 * 784 * 4096
    # Only the full-attention layers grow with the sequence.
    assert QWEN3_5.bytes_per_token == 16 * 4096


@pytest.mark.parametrize(
    ("flags", "tokens", "blocks"),
    [
        ({}, 1, 1 + 3 * 2),  # align mode: the running state and a block-aligned checkpoint
        ({}, 784, 1 + 3 * 2),
        ({}, 785, 2 + 3 * 2),
        ({"prefix_caching": False}, 8192, 11 + 3 * 1),
        ({"prefill_checkpoint_tokens": 64}, 8192, 10 + 3 * 3),  # 832-token blocks
    ],
    ids=["one-token", "one-block", "spill", "no-prefix-caching", "gdn-checkpoints"],
)
def test_a_hybrid_request_holds_whole_blocks_in_every_group(
    flags: dict[str, Any], tokens: int, blocks: int
) -> None:
    kv = replace(QWEN3_5, **flags)
    assert kv.request_blocks(tokens) == blocks
    assert kv.request_kv_bytes(tokens) == blocks * kv.bytes_per_block


def test_gdn_prefill_checkpoints_put_the_block_on_their_64_token_grid() -> None:
    kv = replace(QWEN3_5, prefill_checkpoint_tokens=GDN_PREFILL_CHECKPOINT_TOKENS)
    assert (kv.block_tokens, kv.bytes_per_block) == (832, 16 * 832 * 4096)
    # Without prefix caching there are no checkpoints, and no grid.
    assert replace(kv, prefix_caching=False).block_tokens == 784


def test_a_block_size_vllm_reported_is_not_aligned_again() -> None:
    assert replace(QWEN3_5, block_size_tokens=800, block_size_is_final=True).block_tokens == 800
    # One the operator passed as --block-size is, as vLLM raises it.
    assert replace(QWEN3_5, block_size_tokens=32).block_tokens == 32 * 25
    assert replace(QWEN3_5, block_size_tokens=1024).block_tokens == 1024


def test_tensor_parallelism_splits_the_state_and_the_heads_alike() -> None:
    kv = replace(QWEN3_5, tensor_parallel_size=2)
    assert kv.block_tokens == 784  # both halve: the page ratio stays
    assert kv.bytes_per_block == QWEN3_5.bytes_per_block // 2


def test_state_dtypes_follow_vllms_mamba_cache_flags() -> None:
    # --mamba-ssm-cache-dtype bfloat16 halves the temporal state: 1,634,304 bytes.
    kv = replace(QWEN3_5, ssm_state_dtype_bytes=2)
    assert kv.recurrent_state_bytes(QWEN3_5_STATE) == 10_240 * 3 * 2 + 48 * 128 * 128 * 2
    assert kv.block_tokens == 400
    # --mamba-cache-dtype float32 widens the conv state; the checkpoint's fp32 SSM stays.
    wide = replace(QWEN3_5, conv_state_dtype_bytes=4)
    assert wide.recurrent_state_bytes(QWEN3_5_STATE) == 10_240 * 3 * 4 + 48 * 128 * 128 * 4


def test_mamba2_groups_are_replicated_to_cover_every_head_shard() -> None:
    nemotron = hybrid_geometry(NEMOTRON_NANO_9B_V2)
    state = next(g.state for g in nemotron.layer_groups if g.state is not None)
    assert state.kind is RecurrentKind.MAMBA2
    # conv over x, B and C: 128 x 80 + 2 x 8 x 128 channels; SSM 128 heads x 80 x 128, fp32.
    assert state.shapes(1) == ((12_288, 3), (128, 80, 128))
    single_group = replace(state, n_groups=1)
    assert single_group.shapes(4) == (((10_240 + 2 * 4 * 128) // 4, 3), (32, 80, 128))
    # 4 attention layers (*), 27 Mamba2 (M); the MLP blocks (-) hold nothing.
    assert {g.kind: g.num_layers for g in nemotron.layer_groups} == {
        AttentionKind.FULL: 4,
        AttentionKind.RECURRENT: 27,
    }


def test_blocks_that_hold_nothing_still_take_their_place_in_the_pipeline_split() -> None:
    # vLLM splits Nemotron-Nano-9B-v2's 56 decoder blocks 28/28; the MLP blocks hold no KV.
    staged = replace(hybrid_geometry(NEMOTRON_NANO_9B_V2), pipeline_parallel_size=2)
    assert (staged.num_decoder_layers, staged.num_layers) == (56, 31)
    assert staged.stage_layers == (28, 28)


KV_GEOMETRY_DOC = ROOT / "docs" / "kv-geometry.md"
DOC_MODELS = {
    "Qwen3.5-27B": QWEN3_5_27B,
    "Qwen3.5-35B-A3B": QWEN3_5_35B_A3B,
    "Nemotron-Nano-9B-v2": NEMOTRON_NANO_9B_V2,
}
DOC_FLAGS: dict[str, dict[str, Any]] = {
    "prefix caching (default)": {},
    "prefix caching, FlashInfer GDN prefill (Hopper)": {
        "prefill_checkpoint_tokens": GDN_PREFILL_CHECKPOINT_TOKENS
    },
    "no prefix caching": {"prefix_caching": False},
    "prefix caching, TP 2": {"tensor_parallel_size": 2},
}


def test_the_worked_numbers_in_the_docs() -> None:
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in KV_GEOMETRY_DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and line.split("|")[1].strip() in DOC_MODELS
    ]
    assert len(rows) == 7
    for model, flags, state, block, per_block, blocks, kv_bytes in rows:
        kv = hybrid_geometry(DOC_MODELS[model], **DOC_FLAGS[flags])
        layer_state = next(g.state for g in kv.layer_groups if g.state is not None)
        got = [
            kv.recurrent_state_bytes(layer_state),
            kv.block_tokens,
            kv.bytes_per_block,
            kv.request_blocks(8192),
            kv.request_kv_bytes(8192),
        ]
        expected = [int(cell.replace(",", "")) for cell in (state, block, per_block, blocks)]
        assert got == [*expected, int(kv_bytes.replace(",", ""))], (model, flags)
    qwen = hybrid_geometry(QWEN3_5_27B)
    assert (64 * 4096 * 1000, qwen.request_blocks(1000)) == (250 * 2**20, 8)
    assert format_bytes(qwen.request_kv_bytes(1000)) == "392 MiB"


@pytest.mark.parametrize(
    ("builtin", "text"),
    [("Qwen/Qwen3.5-27B", QWEN3_5_27B), ("Qwen/Qwen3.5-35B-A3B", QWEN3_5_35B_A3B)],
    ids=["dense", "moe"],
)
def test_builtin_qwen3_5_profiles_lay_out_the_public_configs_blocks(
    builtin: str, text: dict[str, Any]
) -> None:
    # The defaults: prefix caching on, FlashInfer's GDN prefill assumed until vLLM is read.
    kv = load_profile(builtin).kv
    public = hybrid_geometry(text, prefill_checkpoint_tokens=GDN_PREFILL_CHECKPOINT_TOKENS)
    assert (kv.block_tokens, kv.bytes_per_block) == (public.block_tokens, public.bytes_per_block)
    for tokens in (1, 8192, 262_144):
        assert kv.request_kv_bytes(tokens) == public.request_kv_bytes(tokens)


# -- MLA: one latent vector a token; LFM2: a short-convolution state a sequence ---------------

# Kimi-VL's Moonlight tower: 27 MLA layers caching kv_lora_rank 512 + qk_rope_head_dim 64.
MOONLIGHT = (LayerGroup(AttentionKind.FULL, 27, 1, 576, latent=True),)


def test_an_mla_layer_caches_one_latent_a_token_whole_on_every_rank() -> None:
    for tensor_parallel_size in (1, 2, 8):
        geometry = KvGeometry(MOONLIGHT, dtype_bytes=2, tensor_parallel_size=tensor_parallel_size)
        assert geometry.bytes_per_token == 27 * 576 * 2
        assert geometry.request_kv_bytes(17) == 2 * 16 * 27 * 576 * 2
    assert KvGeometry(MOONLIGHT, dtype_bytes=1).bytes_per_token == 27 * 576


def test_vllm_picks_flashmlas_64_token_block_for_mla_with_an_fp8_cache() -> None:
    assert default_block_tokens(MOONLIGHT, kv_dtype_bytes=1) == 64
    assert default_block_tokens(MOONLIGHT, kv_dtype_bytes=2) == 16
    assert default_block_tokens(QWEN7B.layer_groups, kv_dtype_bytes=1) == 16


LFM2_CONV = RecurrentState(
    RecurrentKind.SHORT_CONV, num_heads=1024, head_dim=0, state_size=0, conv_kernel=3
)


def test_a_short_convolution_holds_only_a_conv_state() -> None:
    assert LFM2_CONV.shapes(1) == ((1024, 2),)
    assert LFM2_CONV.shapes(2) == ((512, 2),)
    geometry = KvGeometry((), dtype_bytes=2, conv_state_dtype_bytes=4)
    assert geometry.recurrent_state_bytes(LFM2_CONV) == 1024 * 2 * 4


def test_lfm2_conv_layers_share_the_attention_page_and_cost_blocks_not_tokens() -> None:
    # LFM2-VL-450M: 6 attention layers (8 KV heads of 64) and 10 conv layers. The groups are 6
    # layers (10 is under 1.5 x 6): one attention group and two conv groups, one padded.
    geometry = KvGeometry(
        (
            LayerGroup(AttentionKind.FULL, 6, 8, 64),
            LayerGroup(AttentionKind.RECURRENT, 10, 8, 64, state=LFM2_CONV),
        ),
        dtype_bytes=2,
    )
    page = 16 * 2 * 8 * 64 * 2
    assert (geometry.block_tokens, geometry.bytes_per_block) == (16, 6 * page)
    assert geometry.bytes_per_token == 6 * 2048
    assert geometry.request_kv_bytes(8192) == (512 + 2 * 2) * 6 * page


def test_a_hybrid_block_is_raised_until_an_mla_page_holds_the_state() -> None:
    # An MLA layer beside a state larger than 16 tokens of latents: vLLM sizes the attention
    # page with MLAAttentionSpec (576 x 2 bytes a token), not with per-head K and V.
    state = RecurrentState(
        RecurrentKind.SHORT_CONV, num_heads=16 * 576, head_dim=0, state_size=0, conv_kernel=5
    )
    geometry = KvGeometry(
        (
            LayerGroup(AttentionKind.FULL, 1, 1, 576, latent=True),
            LayerGroup(AttentionKind.RECURRENT, 1, 1, 576, state=state),
        ),
        dtype_bytes=2,
    )
    assert geometry.block_tokens == 64  # 16 x 576 x 4 x 2 bytes: 64 tokens of 1,152
    assert geometry.bytes_per_block == 64 * 1152


MLA_DOC_ROWS = {
    "Kimi-VL-A3B (Moonlight: 27 layers)": (KIMI_VL_A3B, 2),
    "Kimi-K2.5 (DeepSeek-V3: 61 layers)": (KIMI_K25, 2),
    "Kimi-K2.5, `--kv-cache-dtype fp8`": (KIMI_K25, 1),
    "DeepSeek-VL2-small (27 layers)": (DEEPSEEK_VL2_SMALL, 2),
}


def test_the_mla_numbers_in_the_docs() -> None:
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in KV_GEOMETRY_DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and line.split("|")[1].strip() in MLA_DOC_ROWS
    ]
    assert len(rows) == len(MLA_DOC_ROWS)
    for model, before, after, block, per_block, kv_bytes in rows:
        text, dtype_bytes = MLA_DOC_ROWS[model]
        groups = read_text_model({}, text_config({"text_config": text})).layer_groups
        kv = KvGeometry(
            groups,
            dtype_bytes=dtype_bytes,
            block_size_tokens=default_block_tokens(groups, dtype_bytes),
        )
        heads = text["num_attention_heads"]
        per_head = 2 * text["num_key_value_heads"] * (text["hidden_size"] // heads) * dtype_bytes
        got = [
            text["num_hidden_layers"] * per_head,
            kv.bytes_per_token,
            kv.block_tokens,
            kv.bytes_per_block,
            kv.request_kv_bytes(8192),
        ]
        cells = (before, after, block, per_block, kv_bytes)
        assert got == [int(cell.split()[0].replace(",", "")) for cell in cells], model


# -- attention layers of different pages (Gemma 4) --------------------------------------------


def test_a_smaller_attention_page_holds_more_tokens_a_block_not_fewer_bytes() -> None:
    # vLLM's unify_kv_cache_spec_page_size: the global layers' page (2 KV heads of 512) is a
    # quarter of the sliding layers' (16 of 256), so their block holds 64 tokens in the same
    # bytes.
    geometry = KvGeometry(
        (
            LayerGroup(AttentionKind.FULL, 2, 2, 512),
            LayerGroup(AttentionKind.SLIDING_WINDOW, 10, 16, 256, window_tokens=1024),
        ),
        dtype_bytes=2,
    )
    sliding_page = 16 * 2 * 16 * 256 * 2
    full, sliding = geometry.layer_groups
    assert (geometry.group_block_tokens(full), geometry.group_block_tokens(sliding)) == (64, 16)
    assert geometry.bytes_per_block == 2 * sliding_page  # groups of 2 layers
    # 100 tokens: 2 global blocks of 64, 7 sliding blocks of 16 in each of 5 groups.
    assert geometry.request_blocks(100) == 2 + 5 * 7
    assert geometry.request_kv_bytes(100) == (2 + 5 * 7) * 2 * sliding_page
    assert geometry.bytes_per_token == 2 * (2 * 2 * 512 * 2) + 10 * (2 * 16 * 256 * 2)


def test_a_page_that_does_not_divide_the_largest_is_padded_to_it() -> None:
    geometry = KvGeometry(
        (
            LayerGroup(AttentionKind.FULL, 1, 3, 128),
            LayerGroup(AttentionKind.SLIDING_WINDOW, 1, 4, 128, window_tokens=512),
        ),
        dtype_bytes=2,
    )
    full = geometry.layer_groups[0]
    assert geometry.group_block_tokens(full) == 16  # 3 heads' page padded to 4 heads'
    largest_page = 16 * 2 * 4 * 128 * 2
    assert geometry.request_kv_bytes(16) == 2 * largest_page
    assert geometry.group_bytes_per_token(full) == largest_page // 16  # the padding counts


GEMMA4_DOC_ROWS = {
    "gemma-4-31B": GEMMA4_31B,
    "gemma-4-26B-A4B": GEMMA4_26B_A4B,
    "gemma-4-E4B": GEMMA4_E4B,
    "gemma-4-E2B": GEMMA4_E2B,
}


def test_the_gemma4_numbers_in_the_docs() -> None:
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in KV_GEOMETRY_DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and line.split("|")[1].strip() in GEMMA4_DOC_ROWS
    ]
    assert len(rows) == len(GEMMA4_DOC_ROWS)
    for model, per_token, block, per_block, kv_bytes in rows:
        kv = hybrid_geometry(GEMMA4_DOC_ROWS[model])
        blocks = sorted({kv.group_block_tokens(g) for g in kv.layer_groups})
        got = [kv.bytes_per_token, blocks, kv.bytes_per_block, kv.request_kv_bytes(8192)]
        want = [
            int(per_token.split()[0].replace(",", "")),
            [int(size) for size in block.split()[0].split("/")],
            int(per_block.split()[0].replace(",", "")),
            int(kv_bytes.split()[0].replace(",", "")),
        ]
        assert got == want, model


@pytest.mark.parametrize(
    ("builtin", "text"),
    [
        ("google/gemma-4-31B-it", GEMMA4_31B),
        ("google/gemma-4-26B-A4B-it", GEMMA4_26B_A4B),
        ("google/gemma-4-E4B-it", GEMMA4_E4B),
        ("google/gemma-4-E2B-it", GEMMA4_E2B),
    ],
    ids=["31B", "26B-A4B", "E4B", "E2B"],
)
def test_builtin_gemma4_profiles_lay_out_the_public_configs_blocks(
    builtin: str, text: dict[str, Any]
) -> None:
    kv, public = load_profile(builtin).kv, hybrid_geometry(text)
    assert (kv.block_tokens, kv.bytes_per_block) == (public.block_tokens, public.bytes_per_block)
    for tokens in (1, 8192, 131_072):
        assert kv.request_kv_bytes(tokens) == public.request_kv_bytes(tokens)
