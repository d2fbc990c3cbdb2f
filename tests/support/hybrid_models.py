"""Hybrid (recurrent-state + attention) and MLA text configs, as their public ``config.json``
hold them, and the sidecar's KV geometry for each; tests/renderer/test_kv_geometry.py checks the
same configs against vLLM's own KV-cache code."""

from __future__ import annotations

from typing import Any

from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.profiles.model_config import read_text_model, text_config

QWEN3_5_27B: dict[str, Any] = {
    "model_type": "qwen3_5_text",
    "hidden_size": 5120,
    "num_hidden_layers": 64,
    "num_attention_heads": 24,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 48,
    "mamba_ssm_dtype": "float32",
    "max_position_embeddings": 262144,
}
QWEN3_5_35B_A3B: dict[str, Any] = {
    "model_type": "qwen3_5_moe_text",
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "mamba_ssm_dtype": "float32",
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 262144,
}
# NVIDIA-Nemotron-Nano-9B-v2: Mamba2 (M), attention (*) and MLP (-) blocks.
NEMOTRON_NANO_9B_V2: dict[str, Any] = {
    "model_type": "nemotron_h",
    "hidden_size": 4480,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "mamba_num_heads": 128,
    "mamba_head_dim": 80,
    "n_groups": 8,
    "ssm_state_size": 128,
    "conv_kernel": 4,
}


# MLA text towers (DeepSeek-V2 / V3 attention: one latent of kv_lora_rank + qk_rope_head_dim
# per token). moonshotai/Kimi-VL-A3B-Instruct's config.json text_config (Moonlight-16B-A3B).
KIMI_VL_A3B: dict[str, Any] = {
    "model_type": "deepseek_v3",
    "hidden_size": 2048,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
# moonshotai/Kimi-K2.5's config.json text_config: Kimi-K2's DeepSeek-V3 shape (64 heads), the
# remote schema's model_type kimi_k2 (transformers' Kimi_K25Config reads it as deepseek_v3).
KIMI_K25: dict[str, Any] = {
    "model_type": "kimi_k2",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
# deepseek-ai/deepseek-vl2-small's config.json language_config (DeepSeek-V2-Lite's attention).
DEEPSEEK_VL2_SMALL: dict[str, Any] = {
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
# deepseek-ai/deepseek-vl2-tiny's language_config: no latent, qk dims 0 (plain MHA in vLLM).
DEEPSEEK_VL2_TINY: dict[str, Any] = {
    "model_type": "deepseek_v2",
    "hidden_size": 1280,
    "num_hidden_layers": 12,
    "num_attention_heads": 10,
    "num_key_value_heads": 10,
    "kv_lora_rank": None,
    "q_lora_rank": None,
    "qk_nope_head_dim": 0,
    "qk_rope_head_dim": 0,
    "v_head_dim": 0,
}
# LFM2-VL: 10 short-convolution and 6 attention layers. LiquidAI/LFM2-VL-450M's config.json
# text_config (LFM2-350M); LFM2-VL-1.6B's (LFM2-1.2B) has the same layer_types, wider.
LFM2_LAYER_TYPES = ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)]
LFM2_VL_450M: dict[str, Any] = {
    "model_type": "lfm2",
    "hidden_size": 1024,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "conv_L_cache": 3,
    "conv_dim": 1024,
    "layer_types": LFM2_LAYER_TYPES,
}
LFM2_VL_1_6B: dict[str, Any] = {
    **LFM2_VL_450M,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "conv_dim": 2048,
}


# Gemma 4's text configs (gemma4_text), the keys that shape the KV cache. Sliding layers take
# head_dim and num_key_value_heads; global (full_attention) layers global_head_dim and, where
# attention_k_eq_v, num_global_key_value_heads; the last num_kv_shared_layers layers read an
# earlier layer's KV. Public copies of the checkpoints' config.json: google/gemma-4-31B-it
# (60 layers, 5 sliding : 1 global, 16 KV heads of 256 sliding, 4 of 512 global with K = V;
# the Gemma-4-31B-CoreAI model card's architecture notes and Gemma-4 configuration references
# quoting it), google/gemma-4-26B-A4B-it (30 layers, 8 KV heads of 256, 2 of 512 global with
# K = V; MoE feed-forward, which holds no KV; public config copies in llama.cpp / mlx ports'
# tests and transformers' ep-plan comment "num_global_key_value_heads=2"),
# google/gemma-4-E4B-it (42 layers, 2 KV heads, 18 shared) and google/gemma-4-E2B-it
# (35 layers, 4 sliding : 1 global, 1 KV head, 20 shared), both without K = V.


def gemma4_layer_types(layers: int) -> list[str]:
    """5 sliding layers to 1 global, Gemma4TextConfig's default pattern."""
    return ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)]


GEMMA4_31B: dict[str, Any] = {
    "model_type": "gemma4_text",
    "hidden_size": 5376,
    "num_hidden_layers": 60,
    "num_attention_heads": 32,
    "num_key_value_heads": 16,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_global_key_value_heads": 4,
    "attention_k_eq_v": True,
    "num_kv_shared_layers": 0,
    "sliding_window": 1024,
    "max_position_embeddings": 262144,
    "layer_types": gemma4_layer_types(60),
}
GEMMA4_26B_A4B: dict[str, Any] = {
    **GEMMA4_31B,
    "hidden_size": 2816,
    "num_hidden_layers": 30,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "num_global_key_value_heads": 2,
    "enable_moe_block": True,
    "num_experts": 128,
    "top_k_experts": 8,
    "moe_intermediate_size": 704,
    "layer_types": gemma4_layer_types(30),
}
GEMMA4_E4B: dict[str, Any] = {
    "model_type": "gemma4_text",
    "hidden_size": 2560,
    "num_hidden_layers": 42,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_global_key_value_heads": None,
    "attention_k_eq_v": False,
    "num_kv_shared_layers": 18,
    "hidden_size_per_layer_input": 256,
    "sliding_window": 512,
    "max_position_embeddings": 131072,
    "layer_types": gemma4_layer_types(42),
}
GEMMA4_E2B: dict[str, Any] = {
    **GEMMA4_E4B,
    "hidden_size": 1536,
    "num_hidden_layers": 35,
    "num_key_value_heads": 1,
    "num_kv_shared_layers": 20,
    "use_double_wide_mlp": True,
    "layer_types": [
        "full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(35)
    ],
}

# Gemma 3n's text configs (gemma3n_text): one head shape, 4 sliding : 1 global, the last
# num_kv_shared_layers layers reading earlier layers' KV. google/gemma-3n-E4B-it's config.json
# (35 layers, 15 shared: Gemma3nTextConfig's defaults) and google/gemma-3n-E2B-it's (30
# layers, 10 shared).
GEMMA3N_E4B: dict[str, Any] = {
    "model_type": "gemma3n_text",
    "hidden_size": 2048,
    "num_hidden_layers": 35,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "sliding_window": 512,
    "num_kv_shared_layers": 15,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
}
GEMMA3N_E2B: dict[str, Any] = {
    **GEMMA3N_E4B,
    "num_hidden_layers": 30,
    "num_kv_shared_layers": 10,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 6,
    "activation_sparsity_pattern": [0.95] * 10 + [0.0] * 20,
}


def hybrid_geometry(text: dict[str, Any], **flags: Any) -> KvGeometry:
    """The sidecar's geometry for a bf16 checkpoint with ``text`` as its text config."""
    model = read_text_model({}, text_config({"text_config": text}))
    return KvGeometry(
        model.layer_groups, dtype_bytes=model.dtype_bytes, layer_order=model.layer_order, **flags
    )
