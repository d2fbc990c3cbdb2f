"""profiles.model_config: the text tower read from a shipped config.json, with transformers'
class defaults for the keys it leaves out (those defaults against transformers itself:
``tests/oracle/test_model_config_oracle.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sidecar.profiles import ProfileOverrides, load_profile, profile_from_configs
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.profiles.model_config import read_text_model, text_config
from tests.support.family_dirs import write_deepseek_vl2_dir, write_kimi_k25_dir, write_lfm2_vl_dir
from tests.support.hybrid_models import (
    GEMMA3N_E2B,
    GEMMA3N_E4B,
    GEMMA4_26B_A4B,
    GEMMA4_31B,
    GEMMA4_E2B,
    GEMMA4_E4B,
)

GEMMA3_4B = "google/gemma-3-4b-it"


def test_a_sparse_shipped_gemma3_config_gets_transformers_class_defaults() -> None:
    # google/gemma-3-4b-it's config.json names only these text keys.
    shipped = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "torch_dtype": "bfloat16",
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "model_type": "gemma3_text",
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "vision_config": {"image_size": 896, "patch_size": 14},
    }
    preprocessor = BUILTIN_MODELS[GEMMA3_4B].preprocessor
    profile = profile_from_configs(GEMMA3_4B, shipped, preprocessor, source="test")
    assert profile.kv == load_profile(GEMMA3_4B).kv
    assert profile.max_position_embeddings == 131_072


# -- MLA text towers and LFM2's short convolutions -------------------------------------------


def _load(directory: Path, **overrides: Any) -> KvGeometry:
    return load_profile(str(directory), ProfileOverrides(**overrides)).kv


def test_an_mla_tower_costs_one_latent_vector_a_token_on_every_rank(tmp_path: Path) -> None:
    # The Kimi-K2.5 directory's DeepSeek-V3 text config: 2 layers, kv_lora_rank 16 and
    # qk_rope_head_dim 8, 2 heads of 32 (per-head K and V would be 256 bytes a layer).
    directory = write_kimi_k25_dir(tmp_path / "kimi_k25")
    latent_bytes = (16 + 8) * 2
    assert _load(directory).bytes_per_token == 2 * latent_bytes
    assert _load(directory, tensor_parallel_size=2).bytes_per_token == 2 * latent_bytes
    assert _load(directory).request_kv_bytes(100) == 7 * 16 * 2 * latent_bytes


def test_an_mla_tower_with_an_fp8_cache_gets_flashmlas_64_token_blocks(tmp_path: Path) -> None:
    directory = write_kimi_k25_dir(tmp_path / "kimi_k25")
    fp8 = _load(directory, kv_cache_dtype="fp8")
    assert (fp8.block_tokens, fp8.bytes_per_block) == (64, 64 * 2 * 24)
    assert fp8.request_kv_bytes(100) == 2 * 64 * 2 * 24
    pinned = _load(directory, kv_cache_dtype="fp8", block_size_tokens=16)
    assert pinned.block_tokens == 16


def _deepseek_vl2_with(tmp_path: Path, **language: Any) -> Path:
    directory = write_deepseek_vl2_dir(tmp_path / "deepseek_vl2")
    config = json.loads((directory / "config.json").read_text())
    config["language_config"] = {**config["language_config"], **language}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_deepseek_vl2_tiny_without_qk_dims_stays_multi_head(tmp_path: Path) -> None:
    directory = write_deepseek_vl2_dir(tmp_path / "deepseek_vl2")
    language = json.loads((directory / "config.json").read_text())["language_config"]
    heads = language["num_attention_heads"]
    per_layer = 2 * language["num_key_value_heads"] * (language["hidden_size"] // heads) * 2
    kv = _load(directory)
    assert kv.bytes_per_token == language["num_hidden_layers"] * per_layer


def test_deepseek_vl2_small_shaped_language_config_is_mla(tmp_path: Path) -> None:
    directory = _deepseek_vl2_with(
        tmp_path, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128
    )
    layers = json.loads((directory / "config.json").read_text())["language_config"][
        "num_hidden_layers"
    ]
    assert _load(directory).bytes_per_token == layers * (512 + 64) * 2


def test_a_deepseek_v3_config_without_mla_keys_gets_the_class_defaults() -> None:
    text = text_config(
        {
            "text_config": {
                "model_type": "deepseek_v3",
                "hidden_size": 1024,
                "num_hidden_layers": 3,
                "num_attention_heads": 8,
            }
        }
    )
    kv = KvGeometry(read_text_model({}, text).layer_groups, dtype_bytes=2)
    assert kv.bytes_per_token == 3 * (512 + 64) * 2


def test_lfm2_conv_layers_hold_a_state_per_sequence_not_kv(tmp_path: Path) -> None:
    # The LFM2-VL directory: one conv layer (hidden 64, 3 taps: a 64 x 2 state) and one
    # attention layer of 1 KV head of 32.
    directory = write_lfm2_vl_dir(tmp_path / "lfm2_vl")
    kv = _load(directory)
    attention_page = 16 * 2 * 32 * 2
    assert kv.bytes_per_token == 2 * 32 * 2
    assert (kv.block_tokens, kv.bytes_per_block) == (16, attention_page)
    # 7 attention blocks for 100 tokens; the conv group holds the running state and the
    # last block-aligned checkpoint with prefix caching on, the running state alone off.
    assert kv.request_kv_bytes(100) == (7 + 2) * attention_page
    assert _load(directory, prefix_caching=False).request_kv_bytes(100) == 8 * attention_page


def test_an_lfm2_config_with_full_attn_idxs_only_has_conv_layers_elsewhere() -> None:
    # Lfm2Config derives layer_types from full_attn_idxs where a config.json gives only those.
    text = text_config(
        {
            "text_config": {
                "model_type": "lfm2",
                "hidden_size": 1024,
                "num_hidden_layers": 16,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "full_attn_idxs": [2, 5, 8, 10, 12, 14],
            }
        }
    )
    kv = KvGeometry(read_text_model({}, text).layer_groups, dtype_bytes=2)
    assert kv.bytes_per_token == 6 * 2 * 8 * 64 * 2
    assert kv.request_kv_bytes(8192) == (512 + 2 * 2) * 6 * 16 * 2048


# -- Gemma 4 and Gemma 3n: global layers of their own shape, KV-shared layers ----------------


def _geometry(text: dict[str, Any], **flags: Any) -> KvGeometry:
    model = read_text_model({}, text_config({"text_config": text}))
    return KvGeometry(model.layer_groups, dtype_bytes=2, layer_order=model.layer_order, **flags)


def test_gemma4_31b_global_layers_cache_their_k_eq_v_heads_of_global_head_dim() -> None:
    kv = _geometry(GEMMA4_31B)
    # 10 global layers of 4 KV heads of 512 (K and V both cached), 50 sliding of 16 of 256.
    assert kv.bytes_per_token == 10 * (2 * 4 * 512 * 2) + 50 * (2 * 16 * 256 * 2)
    # 8,192 tokens: 256 global blocks of 32 tokens, 65 sliding blocks in each of 5 groups of
    # 10, each block a 262,144-byte page in 10 layers. Reading every layer as a sliding one
    # priced 2,194,145,280 bytes.
    assert kv.request_kv_bytes(8192) == (256 + 5 * 65) * 10 * 262_144


def test_gemma4_global_kv_heads_count_only_where_k_eq_v() -> None:
    with_unused_heads = {**GEMMA4_E4B, "num_global_key_value_heads": 1}
    assert _geometry(with_unused_heads) == _geometry(GEMMA4_E4B)
    k_eq_v = {**with_unused_heads, "attention_k_eq_v": True}
    assert _geometry(k_eq_v).bytes_per_token < _geometry(GEMMA4_E4B).bytes_per_token


def test_gemma4_kv_shared_layers_hold_nothing_and_e4b_is_no_longer_priced_low() -> None:
    kv = _geometry(GEMMA4_E4B)
    # The first 24 of 42 layers hold KV: 4 global (2 KV heads of 512), 20 sliding (2 of 256).
    assert kv.num_layers == 24
    assert kv.bytes_per_token == 4 * (2 * 2 * 512 * 2) + 20 * (2 * 2 * 256 * 2)
    # vLLM's figure (tests/renderer/test_kv_geometry.py); every layer at head_dim 256 said
    # 155,287,552, below it.
    assert kv.request_kv_bytes(8192) == 156_499_968


def test_a_gemma4_config_naming_no_gemma4_keys_gets_the_class_defaults() -> None:
    kv = _geometry({"model_type": "gemma4_text", "hidden_size": 2304, "num_hidden_layers": 12})
    full, sliding = kv.layer_groups
    assert (full.num_layers, full.num_kv_heads, full.head_dim) == (2, 4, 512)
    assert (sliding.num_layers, sliding.head_dim, sliding.window_tokens) == (10, 256, 512)


def test_gemma4_last_layer_is_global_whatever_layer_types_says() -> None:
    text = {**GEMMA4_E2B, "num_kv_shared_layers": 0}
    text["layer_types"] = [*text["layer_types"][:-1], "sliding_attention"]
    assert _geometry(text) == _geometry({**GEMMA4_E2B, "num_kv_shared_layers": 0})


def test_a_per_layer_config_saved_by_transformers_is_read_layer_by_layer() -> None:
    saved = {k: v for k, v in GEMMA4_26B_A4B.items() if k not in ("global_head_dim",)}
    saved["per_layer_config"] = {
        f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 2}
        for i, kind in enumerate(GEMMA4_26B_A4B["layer_types"])
        if kind == "full_attention"
    }
    assert _geometry(saved) == _geometry(GEMMA4_26B_A4B)


def test_gemma3n_kv_shared_layers_hold_nothing() -> None:
    # E4B's 35 layers and E2B's 30 both leave 20 that hold KV: 4 global, 16 sliding.
    for text in (GEMMA3N_E4B, GEMMA3N_E2B):
        kv = _geometry(text)
        assert kv.num_layers == 20
        assert kv.request_kv_bytes(8192) == 84_410_368
    assert _geometry({k: v for k, v in GEMMA3N_E4B.items() if k != "num_kv_shared_layers"}) == (
        _geometry(GEMMA3N_E4B)
    )
