"""Hybrid (recurrent-state + attention) text configs, as their public ``config.json`` hold
them, and the sidecar's KV geometry for each; tests/renderer/test_kv_geometry.py checks the
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


def hybrid_geometry(text: dict[str, Any], **flags: Any) -> KvGeometry:
    """The sidecar's geometry for a bf16 checkpoint with ``text`` as its text config."""
    model = read_text_model({}, text_config({"text_config": text}))
    return KvGeometry(
        model.layer_groups, dtype_bytes=model.dtype_bytes, layer_order=model.layer_order, **flags
    )
