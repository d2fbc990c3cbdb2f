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


def hybrid_geometry(text: dict[str, Any], **flags: Any) -> KvGeometry:
    """The sidecar's geometry for a bf16 checkpoint with ``text`` as its text config."""
    model = read_text_model({}, text_config({"text_config": text}))
    return KvGeometry(
        model.layer_groups, dtype_bytes=model.dtype_bytes, layer_order=model.layer_order, **flags
    )
