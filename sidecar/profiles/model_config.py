"""Model config: the language model's KV geometry, read from ``config.json``.

vLLM reads ``config.json`` through transformers' config classes, so this module reads it
the same way: keys a shipped file leaves out take the class defaults, and each decoder
layer's attention kind (full, sliding window, chunked, cross-attention) is derived as
those classes derive it for Gemma 3, Llama 4 and Mllama. Multimodal configs nest the
language model under ``text_config``; text-only configs are read whole.

Two layer kinds are read as vLLM 0.33's model classes build them rather than as heads of K
and V: DeepSeek-V2 / V3-shaped towers (Kimi-VL, Kimi-K2.5, DeepSeek-VL2) cache one latent
vector per token (``latent_attention``), and LFM2's ``conv`` layers hold a short-convolution
state per sequence (``recurrent_state``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sidecar.profiles.kv_geometry import (
    STATELESS_LAYER,
    AttentionKind,
    LayerGroup,
    RecurrentKind,
    RecurrentState,
)

_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}

# Context the checkpoint was validated for, where it is shorter than the position limit.
_VALIDATED_CONTEXT_TOKENS = {"qwen2_5_vl": 32768}

# Qwen3.5's Gated DeltaNet defaults, the dense and MoE text configs' alike.
_GATED_DELTA_NET: dict[str, Any] = {
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "full_attention_interval": 4,
}

# transformers' class defaults for text-config keys that shipped config.json files leave out
# (google/gemma-3-4b-it names neither its heads nor its head_dim, which is not hidden/heads);
# vLLM reads the config through those classes, so the defaults are part of the model.
TEXT_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    "mistral": {"num_attention_heads": 32, "num_key_value_heads": 8},
    "glm4v_text": {"num_attention_heads": 32, "num_key_value_heads": 2},
    # Qwen3_5TextConfig / Qwen3_5MoeTextConfig: every full_attention_interval-th layer is
    # full attention, the others Gated DeltaNet linear attention.
    "qwen3_5_text": {
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        **_GATED_DELTA_NET,
    },
    "qwen3_5_moe_text": {
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "max_position_embeddings": 32768,
        **_GATED_DELTA_NET,
    },
    # NemotronHConfig: Mamba2 mixers beside full attention, per hybrid_override_pattern.
    "nemotron_h": {
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 4096,
        "ssm_state_size": 128,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "conv_kernel": 4,
        "mamba_ssm_cache_dtype": "float32",
    },
}

# DeepSeek-V2 / V3 attention (``DeepseekV2Config`` / ``DeepseekV3Config``): a config.json that
# leaves the MLA keys out gets the class defaults, an MLA layer.
_DEEPSEEK_MLA: dict[str, Any] = {
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
}
TEXT_CONFIG_DEFAULTS["deepseek_v2"] = dict(_DEEPSEEK_MLA)
TEXT_CONFIG_DEFAULTS["deepseek_v3"] = dict(_DEEPSEEK_MLA)
TEXT_CONFIG_DEFAULTS["kimi_k2"] = dict(_DEEPSEEK_MLA)  # Kimi_K25Config reads it as deepseek_v3
# Lfm2Config: no head_dim (hidden / heads), a kernel of 3 taps (2 cached).
TEXT_CONFIG_DEFAULTS["lfm2"] = {"conv_L_cache": 3}
# Gemma4TextConfig: every 6th layer global (the last one always), global layers with a head of
# global_head_dim (512 where config.json leaves it out) and, where attention_k_eq_v, the
# num_global_key_value_heads KV heads.
TEXT_CONFIG_DEFAULTS["gemma4_text"] = {
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "global_head_dim": 512,
}
# Gemma3nTextConfig: every 5th layer global, the last 15 layers reading earlier layers' KV.
TEXT_CONFIG_DEFAULTS["gemma3n_text"] = {
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "max_position_embeddings": 32768,
    "sliding_window": 512,
    "sliding_window_pattern": 5,
    "num_kv_shared_layers": 15,
}

# The text model_types of vLLM 0.33's ``is_deepseek_mla`` that this module prices (the
# DeepSeek-V2 / V3 layer); Kimi-K2.5's remote schema names its DeepSeek-V3 config kimi_k2.
_MLA_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"})

# Layer kinds that hold neither KV nor state (Nemotron-H's MLP and MoE blocks).
_STATELESS_LAYER_TYPES = frozenset({"mlp", "moe"})
# Layer kinds that hold a fixed state per sequence: Qwen3.5's Gated DeltaNet (and Nemotron-H's
# M, mapped to it below), LFM2's short convolutions.
_RECURRENT_LAYER_TYPES = frozenset({"linear_attention", "conv"})
# Text configs whose last ``num_kv_shared_layers`` layers read an earlier layer's KV and
# allocate none (vLLM's ``kv_sharing_target_layer_name``: Gemma 3n, Gemma 4).
_KV_SHARING_MODEL_TYPES = frozenset({"gemma3n_text", "gemma4_text"})
# Nemotron-H's hybrid_override_pattern characters (NemotronHConfig._pattern_to_list).
_NEMOTRON_H_PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}


@dataclass(frozen=True, slots=True)
class TextModel:
    """The language model's facts that the KV prediction needs."""

    hidden_size: int
    dtype_bytes: int
    layer_groups: tuple[LayerGroup, ...]
    max_position_embeddings: int  # 0: the config states none
    layer_order: tuple[int, ...] = ()  # each decoder layer's index into layer_groups


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's config, with transformers' class defaults filled in."""
    # InternVL's chat format names it llm_config, DeepSeek-VL2 and -OCR language_config (vLLM
    # maps both to text_config).
    text = (
        config.get("text_config")
        or config.get("llm_config")
        or config.get("language_config")
        or config
    )
    return {**TEXT_CONFIG_DEFAULTS.get(str(text.get("model_type")), {}), **text}


def read_text_model(config: dict[str, Any], text: dict[str, Any]) -> TextModel:
    """Read the KV geometry; KeyError, TypeError or ValueError for a missing or bad value."""
    dtype_bytes = _DTYPE_BYTES[
        str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "bfloat16")
    ]
    hidden = int(text["hidden_size"])
    heads = int(text["num_attention_heads"])
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or hidden // heads)
    latent_dim = latent_attention_dim(text)
    if latent_dim is not None:
        kv_heads, head_dim = 1, latent_dim
    groups, order = _layer_groups(
        text, _layer_shapes(text, kv_heads, head_dim), latent=latent_dim is not None
    )
    return TextModel(
        hidden_size=hidden,
        dtype_bytes=dtype_bytes,
        layer_groups=groups,
        max_position_embeddings=int(text.get("max_position_embeddings") or 0),
        layer_order=order,
    )


def validated_context_tokens(model_type: str, text: dict[str, Any]) -> int | None:
    """Context the checkpoint was validated for; None when YaRN scaling stretches it."""
    rope_scaling = text.get("rope_scaling") or {}
    if rope_scaling.get("type") == "yarn" or rope_scaling.get("rope_type") == "yarn":
        return None
    return _VALIDATED_CONTEXT_TOKENS.get(model_type)


def latent_attention_dim(text: dict[str, Any]) -> int | None:
    """The latent vector MLA caches per token (``kv_lora_rank + qk_rope_head_dim``), or None
    where vLLM 0.33 runs the layers as per-head K and V.

    vLLM's ``ModelConfig.use_mla``: a DeepSeek-V2 / V3 text config with a ``kv_lora_rank``
    (``is_deepseek_mla``), causal; and ``DeepseekV2DecoderLayer`` builds plain multi-head
    attention where both qk dims are 0 (DeepSeek-VL2-tiny, DeepSeek-OCR). ``VLLM_MLA_DISABLE=1``
    is not followed (the module docs say so).
    """
    if str(text.get("model_type")) not in _MLA_MODEL_TYPES:
        return None
    if text.get("kv_lora_rank") is None or text.get("is_causal", True) is False:
        return None
    rope = int(text.get("qk_rope_head_dim") or 0)
    if rope == 0 and not text.get("qk_nope_head_dim"):
        return None
    return int(text["kv_lora_rank"]) + rope


def recurrent_state(text: dict[str, Any]) -> RecurrentState:
    """The recurrent layers' state as vLLM's model class shapes it: Gated DeltaNet for the
    Qwen3.5 family, Mamba2 for Nemotron-H, a short convolution for LFM2
    (``get_mamba_state_shape_from_config``)."""
    if text.get("model_type") == "lfm2":
        # Lfm2VLForConditionalGeneration: the text model's hidden size, conv_L_cache taps.
        return RecurrentState(
            RecurrentKind.SHORT_CONV,
            num_heads=int(text["hidden_size"]),
            head_dim=0,
            state_size=0,
            conv_kernel=int(text["conv_L_cache"]),
        )
    if "linear_num_value_heads" in text:
        return RecurrentState(
            RecurrentKind.GATED_DELTA_NET,
            num_heads=int(text["linear_num_value_heads"]),
            head_dim=int(text["linear_value_head_dim"]),
            state_size=int(text["linear_key_head_dim"]),
            conv_kernel=int(text["linear_conv_kernel_dim"]),
            num_key_heads=int(text["linear_num_key_heads"]),
            ssm_dtype=_state_dtype(text.get("mamba_ssm_dtype")),
        )
    return RecurrentState(
        RecurrentKind.MAMBA2,
        num_heads=int(text["mamba_num_heads"]),
        head_dim=int(text["mamba_head_dim"]),
        state_size=int(text["ssm_state_size"]),
        conv_kernel=int(text.get("mamba_d_conv") or text["conv_kernel"]),
        n_groups=int(text.get("mamba_n_groups") or text["n_groups"]),
        ssm_dtype=_state_dtype(text.get("mamba_ssm_cache_dtype")),
    )


def _state_dtype(value: object) -> str | None:
    """A checkpoint's SSM state dtype; ValueError for one vLLM's ``MambaDType`` lacks."""
    if value is None or value == "auto":
        return None
    if value not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"unsupported SSM state dtype {value!r}")
    return str(value)


def _layer_shapes(text: dict[str, Any], kv_heads: int, head_dim: int) -> list[tuple[int, int]]:
    """Each decoder layer's (KV heads, head_dim), as transformers' ``per_layer_config`` gives
    them where a config varies them by layer (Gemma 4), else the model's."""
    layer_types = _layer_types(text)
    shapes = [(kv_heads, head_dim)] * len(layer_types)
    overrides = text.get("per_layer_config")
    if isinstance(overrides, dict):
        # A config saved by transformers 5 spells the overrides out, by (zero-padded) index.
        for index, override in overrides.items():
            heads, dim = shapes[int(index)]
            shapes[int(index)] = (
                int(override.get("num_key_value_heads") or heads),
                int(override.get("head_dim") or dim),
            )
        return shapes
    if text.get("model_type") == "gemma4_text":
        # Gemma4TextConfig.__post_init__: global layers take global_head_dim, and the
        # num_global_key_value_heads KV heads where attention_k_eq_v (K and V are still
        # cached apart: vLLM loads K's weights into V's slot).
        global_heads = text.get("num_global_key_value_heads")
        if not text.get("attention_k_eq_v") or global_heads is None:
            global_heads = kv_heads
        global_shape = (int(global_heads), int(text["global_head_dim"]))
        for index, layer_type in enumerate(layer_types):
            if layer_type == AttentionKind.FULL.value:
                shapes[index] = global_shape
    return shapes


def _kv_shared_layers(text: dict[str, Any]) -> int:
    """Trailing layers that reuse an earlier layer's KV and hold none of their own (Gemma 3n,
    Gemma 4: ``num_kv_shared_layers``; vLLM gives them a ``kv_sharing_target_layer_name``
    and no ``KVCacheSpec``)."""
    if text.get("model_type") not in _KV_SHARING_MODEL_TYPES:
        return 0
    return int(text.get("num_kv_shared_layers") or 0)


def _layer_groups(
    text: dict[str, Any], shapes: list[tuple[int, int]], *, latent: bool = False
) -> tuple[tuple[LayerGroup, ...], tuple[int, ...]]:
    """One group per attention kind and shape, and each decoder layer's group in model
    order (``STATELESS_LAYER`` for a layer that holds nothing)."""
    layer_types = _layer_types(text)
    first_shared = len(layer_types) - _kv_shared_layers(text)
    window = text.get("sliding_window")
    chunk = text.get("attention_chunk_size")
    keys: list[tuple[AttentionKind, int, int] | None] = []
    for index, layer_type in enumerate(layer_types):
        if layer_type in _STATELESS_LAYER_TYPES or index >= first_shared:
            keys.append(None)  # no KV, but a place in vLLM's pipeline split
            continue
        kind = (
            AttentionKind.RECURRENT
            if layer_type in _RECURRENT_LAYER_TYPES
            else AttentionKind.from_layer_type(layer_type)
        )
        heads, dim = shapes[index]
        keys.append((kind, heads, dim))
    state = (
        recurrent_state(text)
        if any(key and key[0] is AttentionKind.RECURRENT for key in keys)
        else None
    )
    counts = Counter(key for key in keys if key is not None)
    ordered = sorted(counts, key=lambda key: (key[0].value, -key[2], -key[1]))
    groups = tuple(
        LayerGroup(
            kind,
            counts[(kind, heads, dim)],
            heads,
            dim,
            int(window)
            if kind is AttentionKind.SLIDING_WINDOW and window
            else int(chunk)
            if kind is AttentionKind.CHUNKED and chunk
            else None,
            state if kind is AttentionKind.RECURRENT else None,
            latent and kind is not AttentionKind.RECURRENT,
        )
        for kind, heads, dim in ordered
    )
    order = tuple(STATELESS_LAYER if key is None else ordered.index(key) for key in keys)
    return groups, order


def _layer_types(text: dict[str, Any]) -> list[str]:
    """Each decoder layer's attention kind, derived as transformers' config classes do."""
    pattern_string = text.get("hybrid_override_pattern")
    if not text.get("layer_types") and isinstance(pattern_string, str):
        return [_NEMOTRON_H_PATTERN[c] for c in pattern_string]
    num_layers = int(text["num_hidden_layers"])
    layer_types = [str(t) for t in text.get("layer_types") or []]
    attention_indices = text.get("full_attn_idxs")
    if not layer_types and text.get("model_type") == "lfm2":
        # Lfm2Config: the full_attn_idxs layers attend (all of them by default), the rest conv.
        attention = set(range(num_layers) if attention_indices is None else attention_indices)
        layer_types = ["full_attention" if i in attention else "conv" for i in range(num_layers)]
    interval = text.get("full_attention_interval")
    if not layer_types and interval:
        # Qwen3_5TextConfig: every interval-th layer is full attention, the others linear.
        layer_types = [
            "linear_attention" if (i + 1) % int(interval) else "full_attention"
            for i in range(num_layers)
        ]
    pattern = text.get("sliding_window_pattern")
    if not layer_types and pattern:
        # Gemma3TextConfig: every pattern-th layer is global, the others slide.
        layer_types = [
            "sliding_attention" if (i + 1) % int(pattern) else "full_attention"
            for i in range(num_layers)
        ]
    chunk = text.get("attention_chunk_size")
    if not layer_types and chunk and text.get("model_type") == "llama4_text":
        # Llama4TextConfig: RoPE layers (no_rope_layers[i] == 1) attend within chunks, every
        # no_rope_layer_interval-th layer is NoPE and global; an empty list means that default.
        interval = int(text.get("no_rope_layer_interval") or 4)
        rope = text.get("no_rope_layers") or [
            int((i + 1) % interval != 0) for i in range(num_layers)
        ]
        layer_types = ["chunked_attention" if r else "full_attention" for r in rope]
    layer_types = layer_types or ["full_attention"] * num_layers
    if text.get("model_type") == "gemma4_text" and layer_types:
        layer_types[-1] = "full_attention"  # Gemma4TextConfig forces the last layer global
    for index in text.get("cross_attention_layers") or []:
        layer_types[int(index)] = AttentionKind.CROSS.value  # MllamaTextModel's layer kinds
    return layer_types
