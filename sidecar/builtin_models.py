"""The shipped configuration values of the checkpoints the sidecar knows by name.

Each entry holds the subset of the checkpoint's ``config.json`` and
``preprocessor_config.json`` that the prediction reads, transcribed from the Hugging Face
repositories (see ``shared/reference/model-configs.md``). Built-ins go through exactly the
same loader as a model directory, so a built-in and the real directory give one profile.
``parameter_count`` is the safetensors total, used only by ``plan`` for weight memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_QWEN2_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}
_QWEN3_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


@dataclass(frozen=True, slots=True)
class BuiltinModel:
    """One checkpoint's configuration files, trimmed to what the prediction reads."""

    config: dict[str, Any]
    preprocessor: dict[str, Any]
    parameter_count: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def _qwen2(
    model_type: str, hidden: int, layers: int, heads: int, kv_heads: int, max_pos: int
) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "max_position_embeddings": max_pos,
        "torch_dtype": "bfloat16",
        "use_sliding_window": False,
        # Qwen2-VL's file has no out_hidden_size (its vision "hidden_size" is the LM width); the
        # merger projects to the LM width in both families, so the text hidden size is right.
        "vision_config": {"patch_size": 14, "spatial_merge_size": 2, "out_hidden_size": hidden},
    }


def _qwen3(hidden: int, layers: int, heads: int, kv_heads: int) -> dict[str, Any]:
    return {
        "model_type": "qwen3_vl",
        "text_config": {
            "model_type": "qwen3_vl_text",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "head_dim": 128,
            "max_position_embeddings": 262144,
            "dtype": "bfloat16",
        },
        "vision_config": {"patch_size": 16, "spatial_merge_size": 2, "out_hidden_size": hidden},
    }


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    "llava-hf/llava-1.5-7b-hf": BuiltinModel(
        config={
            "model_type": "llava",
            "vision_feature_select_strategy": "default",
            "image_seq_length": 576,
            "text_config": {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 32,
                "max_position_embeddings": 4096,
                "torch_dtype": "float16",
            },
            "vision_config": {"image_size": 336, "patch_size": 14},
        },
        preprocessor={
            "image_processor_type": "CLIPImageProcessor",
            "size": {"shortest_edge": 336},
            "crop_size": {"height": 336, "width": 336},
        },
        parameter_count=7_063_427_072,
    ),
    "Qwen/Qwen2-VL-2B-Instruct": BuiltinModel(
        _qwen2("qwen2_vl", 1536, 28, 12, 2, 32768), _QWEN2_PREPROCESSOR, 2_208_985_600
    ),
    "Qwen/Qwen2-VL-7B-Instruct": BuiltinModel(
        _qwen2("qwen2_vl", 3584, 28, 28, 4, 32768), _QWEN2_PREPROCESSOR, 8_291_375_616
    ),
    "Qwen/Qwen2-VL-72B-Instruct": BuiltinModel(
        _qwen2("qwen2_vl", 8192, 80, 64, 8, 32768), _QWEN2_PREPROCESSOR, 73_405_560_320
    ),
    "Qwen/Qwen2.5-VL-3B-Instruct": BuiltinModel(
        _qwen2("qwen2_5_vl", 2048, 36, 16, 2, 128000), _QWEN2_PREPROCESSOR, 3_754_622_976
    ),
    "Qwen/Qwen2.5-VL-7B-Instruct": BuiltinModel(
        _qwen2("qwen2_5_vl", 3584, 28, 28, 4, 128000), _QWEN2_PREPROCESSOR, 8_292_166_656
    ),
    "Qwen/Qwen2.5-VL-32B-Instruct": BuiltinModel(
        _qwen2("qwen2_5_vl", 5120, 64, 40, 8, 128000), _QWEN2_PREPROCESSOR, 33_452_718_336
    ),
    "Qwen/Qwen2.5-VL-72B-Instruct": BuiltinModel(
        _qwen2("qwen2_5_vl", 8192, 80, 64, 8, 128000), _QWEN2_PREPROCESSOR, 73_410_777_344
    ),
    "Qwen/Qwen3-VL-2B-Instruct": BuiltinModel(
        _qwen3(2048, 28, 16, 8), _QWEN3_PREPROCESSOR, 2_127_532_032
    ),
    "Qwen/Qwen3-VL-4B-Instruct": BuiltinModel(
        _qwen3(2560, 36, 32, 8), _QWEN3_PREPROCESSOR, 4_437_815_808
    ),
    "Qwen/Qwen3-VL-8B-Instruct": BuiltinModel(
        _qwen3(4096, 36, 32, 8), _QWEN3_PREPROCESSOR, 8_767_123_696
    ),
    "Qwen/Qwen3-VL-32B-Instruct": BuiltinModel(
        _qwen3(5120, 64, 64, 8), _QWEN3_PREPROCESSOR, 33_357_390_064
    ),
}
