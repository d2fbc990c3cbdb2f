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
