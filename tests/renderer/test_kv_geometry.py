"""The sidecar's KV geometry against vLLM 0.33's own KV-cache layout code, run GPU-less.

``vllm_kv_cache.py`` runs in ``.tools/vllm-render``'s Python: transformers' config classes,
the model classes' recurrent-state shapes, vLLM's cache-mode and SSM-dtype hooks, its
hybrid block-size alignment, KV-cache grouping and bytes per block. For each config the
sidecar, reading the same ``config.json`` text config, must give the same block size,
bytes per block, blocks per request (every KV-cache group's) and pool of blocks. One
subprocess for every case; vLLM's import is most of its time.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sidecar.profiles.kv_geometry import (
    STATE_DTYPE_BYTES,
    AttentionKind,
    KvGeometry,
    default_block_tokens,
)
from sidecar.profiles.model_config import read_text_model, text_config
from tests.real_vllm.renderer import VLLM_RENDER
from tests.support.hybrid_models import (
    DEEPSEEK_VL2_SMALL,
    DEEPSEEK_VL2_TINY,
    GEMMA3N_E2B,
    GEMMA3N_E4B,
    GEMMA4_26B_A4B,
    GEMMA4_31B,
    GEMMA4_E2B,
    GEMMA4_E4B,
    KIMI_K25,
    KIMI_VL_A3B,
    LFM2_VL_1_6B,
    LFM2_VL_450M,
    NEMOTRON_NANO_9B_V2,
    QWEN3_5_27B,
    QWEN3_5_35B_A3B,
)

SCRIPT = Path(__file__).with_name("vllm_kv_cache.py")
GIB = 2**30
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
KV_DTYPE_BYTES = {"auto": None, "fp8": 1, "bfloat16": 2, "float16": 2}

# Public config.json text configs (the keys that shape the KV cache), beside the hybrids.
GEMMA_3_4B = {
    "model_type": "gemma3_text",
    "hidden_size": 2560,
    "num_hidden_layers": 34,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "sliding_window": 1024,
}
QWEN2_5_VL_7B = {  # Qwen2.5-VL's language model is Qwen2
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "head_dim": 128,
}

# The multimodal config each text config is nested in (vllm_kv_cache.VLMS).
VLM_OF = {"deepseek_v3": "kimi_vl", "kimi_k2": "kimi_k25", "deepseek_v2": "deepseek_vl_v2"}
VLM_KEYS = {"deepseek_vl_v2": "language_config"}

SEQUENCES = [1, 15, 16, 17, 777, 1000, 4096, 5000, 20_001, 131_072]


def named_cases() -> list[dict[str, Any]]:
    """The checkpoints people serve, with the flags that change their layout."""
    cases: list[dict[str, Any]] = []
    for text in (QWEN3_5_27B, QWEN3_5_35B_A3B):
        cases += [
            {"text_config": text},
            {"text_config": text, "checkpoint_alignment": 64},  # Hopper: FlashInfer GDN
            {"text_config": text, "prefix_caching": False},
            {"text_config": text, "tensor_parallel_size": 2, "kv_cache_dtype": "fp8"},
            {"text_config": text, "mamba_ssm_cache_dtype": "bfloat16"},
        ]
    cases += [
        {"text_config": NEMOTRON_NANO_9B_V2},
        {"text_config": NEMOTRON_NANO_9B_V2, "tensor_parallel_size": 2, "prefix_caching": False},
        {"text_config": NEMOTRON_NANO_9B_V2, "mamba_cache_dtype": "float32"},
        {"text_config": GEMMA_3_4B},
        {"text_config": GEMMA_3_4B, "tensor_parallel_size": 2},
        {"text_config": QWEN2_5_VL_7B},
        {"text_config": QWEN2_5_VL_7B, "block_size": 128, "kv_cache_dtype": "fp8"},
        {"text_config": QWEN3_5_27B, "pipeline_parallel_size": 3},
        {"text_config": QWEN3_5_35B_A3B, "pipeline_parallel_size": 2, "tensor_parallel_size": 2},
        {"text_config": NEMOTRON_NANO_9B_V2, "pipeline_parallel_size": 2},
        {"text_config": GEMMA_3_4B, "pipeline_parallel_size": 2},
    ]
    return cases


def latent_and_conv_cases() -> list[dict[str, Any]]:
    """Kimi-VL, Kimi-K2.5 and DeepSeek-VL2 (MLA) and LFM2-VL (short convolutions), with the
    flags that change their layout: an fp8 cache (FlashMLA's 64-token blocks), TP, PP."""
    cases: list[dict[str, Any]] = []
    for text, vlm in (
        (KIMI_VL_A3B, "kimi_vl"),
        (KIMI_K25, "kimi_k25"),
        (DEEPSEEK_VL2_SMALL, "deepseek_vl_v2"),
    ):
        cases += [
            {"vlm": vlm, "text_config": text},
            {"vlm": vlm, "text_config": text, "kv_cache_dtype": "fp8"},
            {"vlm": vlm, "text_config": text, "tensor_parallel_size": 8},
            {"vlm": vlm, "text_config": text, "kv_cache_dtype": "fp8", "block_size": 16},
            {"vlm": vlm, "text_config": text, "pipeline_parallel_size": 4},
        ]
    cases.append({"vlm": "deepseek_vl_v2", "text_config": DEEPSEEK_VL2_TINY})
    # An LFM2 config naming only full_attn_idxs: Lfm2Config derives the conv layers.
    indices_only = {k: v for k, v in LFM2_VL_450M.items() if k != "layer_types"}
    indices_only["full_attn_idxs"] = [2, 5, 8, 10, 12, 14]
    cases.append({"vlm": "lfm2_vl", "text_config": indices_only})
    for text in (LFM2_VL_450M, LFM2_VL_1_6B):
        cases += [
            {"vlm": "lfm2_vl", "text_config": text},
            {"vlm": "lfm2_vl", "text_config": text, "prefix_caching": False},
            {"vlm": "lfm2_vl", "text_config": text, "tensor_parallel_size": 2},
            {"vlm": "lfm2_vl", "text_config": text, "mamba_cache_dtype": "float32"},
            {"vlm": "lfm2_vl", "text_config": text, "kv_cache_dtype": "fp8"},
            {"vlm": "lfm2_vl", "text_config": text, "pipeline_parallel_size": 2},
        ]
    return cases


GEMMA4_SHAPES = (GEMMA4_31B, GEMMA4_26B_A4B, GEMMA4_E4B, GEMMA4_E2B)


def gemma_cases() -> list[dict[str, Any]]:
    """Gemma 4 (global layers of another head size and KV heads, KV-shared layers) and
    Gemma 3n (KV-shared layers), with the flags that change their layout."""
    cases: list[dict[str, Any]] = []
    for text in (*GEMMA4_SHAPES, GEMMA3N_E2B, GEMMA3N_E4B):
        cases += [
            {"text_config": text},
            {"text_config": text, "kv_cache_dtype": "fp8"},
            {"text_config": text, "tensor_parallel_size": 2},
            {"text_config": text, "pipeline_parallel_size": 2},
            {"text_config": text, "prefix_caching": False},
            {"text_config": text, "block_size": 32, "tensor_parallel_size": 4},
        ]
    # A config naming none of the Gemma 4 keys: Gemma4TextConfig's defaults (global_head_dim
    # 512, every 6th layer global), and one whose global layers K = V on a num_global_key_value
    # _heads that attention_k_eq_v leaves unused.
    cases.append(
        {"text_config": {"model_type": "gemma4_text", "hidden_size": 2304, "num_hidden_layers": 13}}
    )
    cases.append({"text_config": {**GEMMA4_E4B, "num_global_key_value_heads": 1}})
    return cases


def random_gemma4_cases(count: int, seed: int = 44) -> list[dict[str, Any]]:
    """Random Gemma 4 layouts: head sizes, KV heads, windows, sharing and flags."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for _ in range(count):
        layers = rng.randint(2, 48)
        tp = rng.choice([1, 2, 4])
        text: dict[str, Any] = {
            "model_type": "gemma4_text",
            "hidden_size": 1024,
            "num_hidden_layers": layers,
            "num_attention_heads": 8,
            "num_key_value_heads": rng.choice([1, 2, 4, 8, 16]),
            "head_dim": rng.choice([128, 256]),
            "global_head_dim": rng.choice([128, 256, 512]),
            "num_global_key_value_heads": rng.choice([None, 1, 2, 4]),
            "attention_k_eq_v": rng.random() < 0.5,
            "sliding_window": rng.choice([512, 1000, 1024]),
            "num_kv_shared_layers": rng.choice([0, 0, rng.randint(0, layers // 2)]),
            "layer_types": [
                rng.choice(["sliding_attention"] * 4 + ["full_attention"]) for _ in range(layers)
            ],
        }
        case: dict[str, Any] = {
            "text_config": text,
            "tensor_parallel_size": tp,
            "model_dtype": rng.choice(["bfloat16", "float16"]),
            "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
            "prefix_caching": rng.random() < 0.7,
            "block_size": rng.choice([16, 16, 32, 128]),
            "available_bytes": rng.randint(1, 80) * GIB,
        }
        if rng.random() < 0.3:
            case["pipeline_parallel_size"] = 2
        cases.append(case)
    return cases


def random_latent_and_conv_cases(count: int, seed: int = 33) -> list[dict[str, Any]]:
    """Random MLA and LFM2 layouts and flags."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for index in range(count):
        tp = rng.choice([1, 2, 4])
        if index % 2 == 0:
            model_type = rng.choice(["deepseek_v2", "deepseek_v3", "kimi_k2"])
            text: dict[str, Any] = {
                "model_type": model_type,
                "hidden_size": 2048,
                "num_hidden_layers": rng.randint(2, 61),
                "num_attention_heads": 16,
                "num_key_value_heads": 16,
                "kv_lora_rank": rng.choice([256, 512]),
                "q_lora_rank": None,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
            }
            vlm = VLM_OF[model_type]
        else:
            heads = rng.choice([8, 16, 32])
            hidden = heads * rng.choice([64, 128])
            layers = rng.randint(2, 24)
            kinds = [rng.choice(["conv", "conv", "full_attention"]) for _ in range(layers)]
            text = {
                "model_type": "lfm2",
                "hidden_size": hidden,
                "num_hidden_layers": layers,
                "num_attention_heads": heads,
                "num_key_value_heads": rng.choice([4, 8]),
                "conv_L_cache": rng.choice([2, 3, 4]),
                "conv_dim": hidden,
                "layer_types": [*kinds, "full_attention"],
            }
            text["num_hidden_layers"] = len(text["layer_types"])
            vlm = "lfm2_vl"
        case: dict[str, Any] = {
            "vlm": vlm,
            "text_config": text,
            "tensor_parallel_size": tp,
            "model_dtype": rng.choice(["bfloat16", "float16"]),
            "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
            "prefix_caching": rng.random() < 0.7,
            "available_bytes": rng.randint(1, 80) * GIB,
        }
        if rng.random() < 0.4:
            case["block_size"] = rng.choice([16, 32, 64, 128])
        if rng.random() < 0.3:
            case["pipeline_parallel_size"] = 2
        if vlm == "lfm2_vl" and rng.random() < 0.4:
            case["mamba_cache_dtype"] = rng.choice(["float32", "bfloat16"])
        cases.append(case)
    return cases


def random_cases(count: int, seed: int = 22) -> list[dict[str, Any]]:
    """Random Gated DeltaNet, Mamba2 and sliding-window layouts and flags."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for index in range(count):
        tp = rng.choice([1, 2, 4])
        family = index % 3
        if family == 0:
            text: dict[str, Any] = {
                "model_type": rng.choice(["qwen3_5_text", "qwen3_5_moe_text"]),
                "hidden_size": 1024,
                "num_hidden_layers": rng.randint(2, 64),
                "num_attention_heads": 16,
                "num_key_value_heads": rng.choice([1, 2, 4, 8]),
                "head_dim": rng.choice([64, 128, 256]),
                "full_attention_interval": rng.randint(2, 6),
                "linear_conv_kernel_dim": rng.choice([2, 4]),
                "linear_key_head_dim": rng.choice([64, 128]),
                "linear_value_head_dim": rng.choice([64, 128]),
                "linear_num_key_heads": rng.choice([4, 8, 16]),
                "linear_num_value_heads": rng.choice([16, 32, 48, 64]),
            }
            if rng.random() < 0.5:
                text["mamba_ssm_dtype"] = rng.choice(["float32", "bfloat16"])
        elif family == 1:
            layers = rng.randint(4, 60)
            pattern = "".join(rng.choice("MMM*-E") for _ in range(layers))
            text = {
                "model_type": "nemotron_h",
                "hidden_size": 2048,
                "hybrid_override_pattern": pattern + "*",
                "num_attention_heads": 32,
                "num_key_value_heads": rng.choice([2, 4, 8]),
                "head_dim": rng.choice([64, 128]),
                "mamba_num_heads": rng.choice([32, 64, 128]),
                "mamba_head_dim": rng.choice([32, 64, 80]),
                "n_groups": rng.choice([1, 2, 8]),
                "ssm_state_size": rng.choice([64, 128]),
                "conv_kernel": 4,
            }
            if rng.random() < 0.5:
                text["mamba_ssm_cache_dtype"] = rng.choice(["float32", "bfloat16"])
        else:
            text = {
                "model_type": "gemma3_text",
                "hidden_size": 1024,
                "num_hidden_layers": rng.randint(2, 62),
                "num_attention_heads": 8,
                "num_key_value_heads": rng.choice([1, 2, 4, 8, 16]),
                "head_dim": rng.choice([128, 256]),
                "sliding_window": rng.choice([512, 1000, 1024, 4096]),
                "sliding_window_pattern": rng.randint(2, 7),
            }
        case: dict[str, Any] = {
            "text_config": text,
            "tensor_parallel_size": tp,
            "model_dtype": rng.choice(["bfloat16", "float16", "float32"]),
            "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
            "prefix_caching": rng.random() < 0.7,
            "block_size": rng.choice([16, 16, 32, 128]),
            "available_bytes": rng.randint(1, 80) * GIB,
        }
        if family == 0 and rng.random() < 0.5:
            case["checkpoint_alignment"] = 64
        if rng.random() < 0.3:
            case["pipeline_parallel_size"] = rng.choice([2, 3])
        if family < 2 and rng.random() < 0.4:
            case["mamba_cache_dtype"] = rng.choice(["float32", "bfloat16"])
        if family < 2 and rng.random() < 0.4:
            case["mamba_ssm_cache_dtype"] = rng.choice(["float32", "bfloat16", "float16"])
        if _divisible(text, tp):
            cases.append(case)
    return cases


def _divisible(text: dict[str, Any], tp: int) -> bool:
    """Whether vLLM can split the layers' heads over ``tp`` ranks (it refuses otherwise)."""
    heads = [text.get("linear_num_value_heads", 0), text.get("mamba_num_heads", 0)]
    return all(h % tp == 0 for h in heads)


def sidecar_geometry(case: dict[str, Any]) -> KvGeometry:
    """The sidecar's geometry for ``case``, read from the same text config."""
    key = VLM_KEYS.get(case.get("vlm", ""), "text_config")
    text = text_config({key: case["text_config"]})
    model = read_text_model({"torch_dtype": case.get("model_dtype", "bfloat16")}, text)
    model_dtype_bytes = DTYPE_BYTES[case.get("model_dtype", "bfloat16")]
    kv_bytes = KV_DTYPE_BYTES[case.get("kv_cache_dtype", "auto")] or model_dtype_bytes
    conv = case.get("mamba_cache_dtype", "auto")
    ssm = case.get("mamba_ssm_cache_dtype", "auto")
    conv_bytes = model_dtype_bytes if conv == "auto" else STATE_DTYPE_BYTES[conv]
    return KvGeometry(
        layer_groups=model.layer_groups,
        dtype_bytes=kv_bytes,
        tensor_parallel_size=case.get("tensor_parallel_size", 1),
        block_size_tokens=case.get("block_size")
        or default_block_tokens(model.layer_groups, kv_bytes),
        layer_order=model.layer_order,
        conv_state_dtype_bytes=conv_bytes,
        ssm_state_dtype_bytes=None if ssm == "auto" else STATE_DTYPE_BYTES[ssm],
        prefix_caching=case.get("prefix_caching", True),
        prefill_checkpoint_tokens=case.get("checkpoint_alignment"),
        pipeline_parallel_size=case.get("pipeline_parallel_size", 1),
    )


def vllm_layouts(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for case in cases:
        case.setdefault("sequence_tokens", SEQUENCES)
    answer = subprocess.run(  # noqa: S603 - our own script, fixed argv
        [str(VLLM_RENDER / "bin" / "python"), str(SCRIPT)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
        check=False,
    )
    if answer.returncode:
        sys.stderr.write(answer.stderr[-4000:])
    assert answer.returncode == 0, "vLLM's KV-cache code failed; its stderr is above"
    return list(json.loads(answer.stdout))


def differences(case: dict[str, Any], vllm: dict[str, Any]) -> list[str]:
    """Where the sidecar's geometry disagrees with vLLM's layout for ``case``."""
    kv = sidecar_geometry(case)
    found = []
    if kv.block_tokens != vllm["block_size"]:
        found.append(f"block size {kv.block_tokens} != {vllm['block_size']}")
    if kv.bytes_per_block != vllm["bytes_per_block"]:
        found.append(f"bytes per block {kv.bytes_per_block} != {vllm['bytes_per_block']}")
    pool = case.get("available_bytes", 40 * GIB) // kv.bytes_per_block
    if pool != vllm["num_blocks"]:
        found.append(f"pool {pool} blocks != {vllm['num_blocks']}")
    sliding = any(g.kind is AttentionKind.SLIDING_WINDOW for g in kv.layer_groups)
    for position, tokens in enumerate(case["sequence_tokens"]):
        blocks = [held[position] for _, held in vllm["groups"]]
        if sliding:
            # vLLM's cap (steady state, nothing in flight) has a block for a window that
            # starts mid-block, which a sequence shorter than its window cannot need.
            blocks = [
                min(held, -(-tokens // block)) if kind == "SlidingWindowSpec" else held
                for (kind, _), held, block in zip(
                    vllm["groups"], blocks, vllm["group_block_sizes"], strict=True
                )
            ]
        ours = kv.request_blocks(tokens)
        if ours != sum(blocks):
            found.append(f"{tokens} tokens: {ours} blocks != {sum(blocks)}")
        if kv.request_kv_bytes(tokens) != sum(blocks) * vllm["bytes_per_block"]:
            found.append(f"{tokens} tokens: bytes {kv.request_kv_bytes(tokens)}")
    return found


@pytest.fixture(scope="module")
def installed() -> None:
    if not (VLLM_RENDER / "bin" / "python").is_file():
        pytest.skip("vLLM 0.33 is not installed: python3 tests/real_vllm/install.py render")


def test_sidecar_kv_geometry_equals_vllm_kv_cache_layout(installed: None) -> None:
    cases = named_cases() + random_cases(60)
    layouts = vllm_layouts(cases)
    report = {
        f"{index}: {json.dumps(case['text_config'])[:120]} {case}": found
        for index, (case, layout) in enumerate(zip(cases, layouts, strict=True))
        if (found := differences(case, layout))
    }
    assert not report, json.dumps(report, indent=1)[:6000]
    hybrid = [layout for layout in layouts if layout["mamba_cache_mode"] == "align"]
    assert len(hybrid) >= 20, "the cases must exercise the hybrid layout"
    assert {layout["block_size"] for layout in hybrid} - {16, 32, 128}, "no raised block size"
    staged = [case for case in cases if case.get("pipeline_parallel_size", 1) > 1]
    assert len(staged) >= 10, "the cases must exercise pipeline parallelism"


def test_mla_and_short_conv_geometry_equals_vllm_kv_cache_layout(installed: None) -> None:
    cases = latent_and_conv_cases() + random_latent_and_conv_cases(40)
    layouts = vllm_layouts(cases)
    report = {
        f"{index}: {case}": found
        for index, (case, layout) in enumerate(zip(cases, layouts, strict=True))
        if (found := differences(case, layout))
    }
    assert not report, json.dumps(report, indent=1)[:6000]
    kinds = {kind for layout in layouts for kind, _ in layout["groups"]}
    assert {"MLAAttentionSpec", "MambaSpec", "FullAttentionSpec"} <= kinds
    assert {layout["block_size"] for layout in layouts} >= {16, 64}, "FlashMLA's block unused"
    assert sum(layout["mamba_cache_mode"] == "align" for layout in layouts) >= 10


def test_gemma_geometry_equals_vllm_kv_cache_layout(installed: None) -> None:
    cases = gemma_cases() + random_gemma4_cases(40)
    layouts = vllm_layouts(cases)
    report = {
        f"{index}: {case}": found
        for index, (case, layout) in enumerate(zip(cases, layouts, strict=True))
        if (found := differences(case, layout))
    }
    assert not report, json.dumps(report, indent=1)[:6000]
    raised = [layout for layout in layouts if len(set(layout["group_block_sizes"])) > 1]
    assert len(raised) >= 20, "the cases must exercise page-size unification"


def test_gemma4_worked_numbers(installed: None) -> None:
    """The figures docs/kv-geometry.md quotes for Gemma 4, one GPU, bf16, 8,192 tokens."""
    cases = [{"text_config": text, "sequence_tokens": [8192]} for text in GEMMA4_SHAPES]
    layouts = vllm_layouts(cases)
    figures = []
    for case, layout in zip(cases, layouts, strict=True):
        assert not differences(case, layout)
        kv = sidecar_geometry(case)
        figures.append(
            (
                kv.bytes_per_token,
                layout["block_size"],
                layout["group_block_sizes"],
                layout["bytes_per_block"],
                kv.request_kv_bytes(8192),
            )
        )
    assert figures == GEMMA4_WORKED_NUMBERS


# (bytes per token, vLLM's block size, each KV-cache group's block size, bytes per block,
# KV for 8,192 tokens): 31B and 26B-A4B's global pages are half their sliding pages, so a
# global block holds 32 tokens; E4B and E2B's sliding pages are half their global pages.
GEMMA4_WORKED_NUMBERS = [
    (901_120, 16, [16] * 5 + [32], 2_621_440, 1_523_056_640),
    (225_280, 16, [16] * 5 + [32], 655_360, 380_764_160),
    (57_344, 16, [32] * 5 + [16], 262_144, 156_499_968),
    (18_432, 16, [32] * 4 + [16], 98_304, 57_016_320),
]


def test_mla_and_lfm2_worked_numbers(installed: None) -> None:
    """The figures docs/kv-geometry.md quotes for MLA towers and LFM2-VL, one GPU, 8,192
    tokens: bytes per token, block size, bytes per block and the request's KV."""
    cases = [
        {"vlm": "kimi_vl", "text_config": KIMI_VL_A3B},
        {"vlm": "kimi_k25", "text_config": KIMI_K25},
        {"vlm": "deepseek_vl_v2", "text_config": DEEPSEEK_VL2_SMALL},
        {"vlm": "kimi_k25", "text_config": KIMI_K25, "kv_cache_dtype": "fp8"},
        {"vlm": "lfm2_vl", "text_config": LFM2_VL_450M},
        {"vlm": "lfm2_vl", "text_config": LFM2_VL_1_6B},
    ]
    for case in cases:
        case["sequence_tokens"] = [8192]
    layouts = vllm_layouts(cases)
    figures = []
    for case, layout in zip(cases, layouts, strict=True):
        assert not differences(case, layout)
        kv = sidecar_geometry(case)
        per_block = layout["bytes_per_block"]
        figures.append(
            (kv.bytes_per_token, layout["block_size"], per_block, kv.request_kv_bytes(8192))
        )
    latent_bf16 = 1152  # (512 + 64) x 2 bytes a token a layer, whole on every rank
    assert figures == [
        (27 * latent_bf16, 16, 27 * 16 * latent_bf16, 512 * 27 * 16 * latent_bf16),
        (61 * latent_bf16, 16, 61 * 16 * latent_bf16, 512 * 61 * 16 * latent_bf16),
        (27 * latent_bf16, 16, 27 * 16 * latent_bf16, 512 * 27 * 16 * latent_bf16),
        (61 * 576, 64, 61 * 64 * 576, 128 * 61 * 64 * 576),  # fp8: FlashMLA's 64-token blocks
        # 6 attention layers of 8 KV heads of 64 (2,048 bytes a token each) in one group of 6,
        # the 10 conv layers in 2 groups of 6 (one padding), each holding 2 blocks.
        (6 * 2048, 16, 6 * 16 * 2048, (512 + 2 * 2) * 6 * 16 * 2048),
        (6 * 2048, 16, 6 * 16 * 2048, (512 + 2 * 2) * 6 * 16 * 2048),
    ]


def test_qwen3_5_27b_worked_numbers(installed: None) -> None:
    """The figures docs/kv-geometry.md quotes for Qwen3.5-27B on one GPU, bf16."""
    cases = [
        {"text_config": QWEN3_5_27B, "sequence_tokens": [8192]},
        {"text_config": QWEN3_5_27B, "sequence_tokens": [8192], "checkpoint_alignment": 64},
    ]
    default, hopper = vllm_layouts(cases)
    assert not differences(cases[0], default)
    assert not differences(cases[1], hopper)
    kv = sidecar_geometry(cases[0])
    state = next(g.state for g in kv.layer_groups if g.state is not None)
    assert kv.recurrent_state_bytes(state) == 3_207_168  # 10240x3 bf16 conv + 48x128x128 fp32
    assert kv.attention_bytes_per_token(kv.layer_groups[0]) == 4096
    assert (kv.block_tokens, kv.bytes_per_block) == (784, 51_380_224)
    assert kv.request_blocks(8192) == 11 + 3 * 2  # 11 attention blocks, 2 per GDN group
    on_hopper = replace(kv, prefill_checkpoint_tokens=64)
    assert (on_hopper.block_tokens, on_hopper.bytes_per_block) == (832, 54_525_952)
    assert on_hopper.request_blocks(8192) == 10 + 3 * 3
    # Per-token arithmetic over all 64 layers: 262,144 bytes a token, 2.1 GiB at 8,192.
    assert 64 * 4096 * 8192 == 2_147_483_648
    assert kv.request_kv_bytes(8192) == 873_463_808
