"""The shipped configuration values of the checkpoints the sidecar knows by name.

Each entry holds the subset of the checkpoint's ``config.json`` and
``preprocessor_config.json`` that the prediction reads, transcribed from the Hugging Face
repositories (or public copies of gated ones). Built-ins go through exactly the
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
# video_preprocessor_config.json of the Qwen3-VL checkpoints (Qwen2/2.5-VL ship none, so
# transformers builds their video processor from preprocessor_config.json). Not read from
# the Qwen repositories themselves: the same values appear in several independent public copies
# (GGUF-to-HF converters, deployment guides quoting the file in full), medium-high confidence.
_QWEN3_VIDEO_PREPROCESSOR: dict[str, Any] = {
    "video_processor_type": "Qwen3VLVideoProcessor",
    "size": {"shortest_edge": 4096, "longest_edge": 25165824},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "fps": 2,
    "min_frames": 4,
    "max_frames": 768,
}


@dataclass(frozen=True, slots=True)
class BuiltinModel:
    """One checkpoint's configuration files, trimmed to what the prediction reads."""

    config: dict[str, Any]
    preprocessor: dict[str, Any]
    parameter_count: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    # None: the checkpoint has no video processor config of its own (see
    # ``profiles.profile_from_configs``).
    video_preprocessor: dict[str, Any] | None = None


def _text_tower(
    model_type: str,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    positions: int,
) -> dict[str, Any]:
    """A text tower's attention geometry as ``config.json`` spells it; merge other keys in."""
    return {
        "model_type": model_type,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "max_position_embeddings": positions,
    }


def _qwen2(
    model_type: str, hidden: int, layers: int, heads: int, kv_heads: int, max_pos: int
) -> dict[str, Any]:
    return _text_tower(model_type, hidden, layers, heads, kv_heads, max_pos) | {
        "torch_dtype": "bfloat16",
        "use_sliding_window": False,
        # Qwen2-VL's file has no out_hidden_size (its vision "hidden_size" is the LM width); the
        # merger projects to the LM width in both families, so the text hidden size is right.
        "vision_config": {"patch_size": 14, "spatial_merge_size": 2, "out_hidden_size": hidden},
    }


def _qwen3(
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    parameter_count: int,
    *,
    model_type: str = "qwen3_vl",
) -> BuiltinModel:
    """A Qwen3-VL checkpoint: the shared processor files around its text tower's geometry."""
    config = {
        "model_type": model_type,
        "text_config": _text_tower(f"{model_type}_text", hidden, layers, heads, kv_heads, 262144)
        | {"head_dim": 128, "dtype": "bfloat16"},
        "vision_config": {"patch_size": 16, "spatial_merge_size": 2, "out_hidden_size": hidden},
    }
    return BuiltinModel(
        config,
        _QWEN3_PREPROCESSOR,
        parameter_count,
        video_preprocessor=_QWEN3_VIDEO_PREPROCESSOR,
    )


def _qwen3_5(
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    linear_value_heads: int,
    *,
    moe: bool = False,
) -> BuiltinModel:
    """A Qwen3.5 / Qwen3.6 checkpoint: Gated DeltaNet (linear attention) layers with every
    4th layer full attention (head_dim 256), behind the Qwen3-VL processor files.

    Every size shares head_dim 256, 16 linear key heads of 128, value heads of 128, a conv
    kernel of 4, a float32 SSM state, 262,144 positions, bfloat16, and a vision tower of
    patch 16, merge 2 whose merger projects to the text width. The processor files are the
    Qwen3-VL family's (vLLM's ``Qwen3_5ProcessingInfo`` is ``Qwen3VLProcessingInfo`` with its
    own config class)."""
    model_type = "qwen3_5_moe" if moe else "qwen3_5"
    architecture = (
        "Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"
    )
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "text_config": _text_tower(f"{model_type}_text", hidden, layers, heads, kv_heads, 262144)
        | {
            "head_dim": 256,
            "dtype": "bfloat16",
            "full_attention_interval": 4,
            "layer_types": [
                "full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)
            ],
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": linear_value_heads,
            "linear_value_head_dim": 128,
            # The Gated DeltaNet state in float32, as every Qwen3.5 config.json asks of vLLM
            # (--mamba-ssm-cache-dtype auto reads it): twice the bytes of a bf16 state.
            "mamba_ssm_dtype": "float32",
        },
        "vision_config": {
            "model_type": f"{model_type}_vision",
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": hidden,
        },
    }
    return BuiltinModel(config, _QWEN3_PREPROCESSOR, video_preprocessor=_QWEN3_VIDEO_PREPROCESSOR)


# google/gemma-3-*-it preprocessor_config.json (Synthetica-AI/gemma-3-4b-it "Copy model
# google/gemma-3-4b-it"; same in RedHatAI/gemma-3-12b-it-quantized.w4a16), plus
# processor_config.json's image_seq_length. do_pan_and_scan is null: Gemma3Processor reads False.
_GEMMA3_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "Gemma3ImageProcessor",
    "size": {"height": 896, "width": 896},
    "do_pan_and_scan": None,
    "image_seq_length": 256,
}


def _gemma3(hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int) -> dict[str, Any]:
    # The shipped text_config omits what equals Gemma3TextConfig's defaults (4B: heads, KV heads,
    # head_dim; all: the window pattern and positions); they are spelled out here.
    return {
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "torch_dtype": "bfloat16",
        "text_config": _text_tower("gemma3_text", hidden, layers, heads, kv_heads, 131072)
        | {"head_dim": head_dim, "sliding_window": 1024, "sliding_window_pattern": 6},
        "vision_config": {"model_type": "siglip_vision_model", "image_size": 896, "patch_size": 14},
    }


# Gemma 4's processor values, every size alike (google/gemma-4-*-it's processor_config.json:
# 16 px patches pooled 3 x 3, 280 soft tokens by default; medium confidence: public copies and
# model-card quotes, not the gated repositories themselves). The gemma4 rule reads
# vision_config's patch_size, pooling_kernel_size and default_output_length.
_GEMMA4_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "Gemma4ImageProcessor",
    "patch_size": 16,
    "max_soft_tokens": 280,
    "pooling_kernel_size": 3,
}


def _gemma4(
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    *,
    positions: int,
    window: int,
    pattern: int,
    global_kv_heads: int | None,
    kv_shared_layers: int,
) -> dict[str, Any]:
    """A Gemma 4 checkpoint: sliding layers of head_dim 256, global layers (every
    ``pattern``-th) of global_head_dim 512 with ``global_kv_heads`` KV heads where K = V
    (``attention_k_eq_v``), the last ``kv_shared_layers`` reading earlier layers' KV."""
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "torch_dtype": "bfloat16",
        "text_config": _text_tower("gemma4_text", hidden, layers, heads, kv_heads, positions)
        | {
            "head_dim": 256,
            "global_head_dim": 512,
            "num_global_key_value_heads": global_kv_heads,
            "attention_k_eq_v": global_kv_heads is not None,
            "num_kv_shared_layers": kv_shared_layers,
            "sliding_window": window,
            "layer_types": [
                "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                for i in range(layers)
            ],
        },
        "vision_config": {
            "model_type": "gemma4_vision",
            "patch_size": 16,
            "pooling_kernel_size": 3,
            "default_output_length": 280,
        },
    }


def _mistral_text(max_positions: int) -> dict[str, Any]:
    """Mistral Nemo 12B / Mistral Small 24B text tower: 40 layers, 8 KV heads of 128."""
    return _text_tower("mistral", 5120, 40, 32, 8, max_positions) | {
        "head_dim": 128,
        "sliding_window": None,
    }


def _pixtral_preprocessor(
    patch_px: int, longest_edge_px: int, *, spatial_merge_size: int
) -> dict[str, Any]:
    """A Pixtral preprocessor config (``patch_size`` as the dict the processor file holds)."""
    return {
        "image_processor_type": "PixtralImageProcessor",
        "patch_size": {"height": patch_px, "width": patch_px},
        "size": {"longest_edge": longest_edge_px},
        "spatial_merge_size": spatial_merge_size,
    }


# --- Tile / anyres families -------------------------------------------------------------------
# Processor values: each checkpoint's preprocessor_config.json (the oracle tests hold the rules).
_LLAVA_NEXT_PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]
_LLAVA_ONEVISION_PINPOINTS = [[384 * i, 384 * j] for i in range(1, 7) for j in range(1, 7)]
# InternVL3-*-hf processor_config.json (image_seq_length, <img>/</img>/<IMG_CONTEXT>) and the
# GotOcr2 image processor's 448 px tiles, 1-12 patches; the same for every InternVL3 size.
_INTERNVL3_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "GotOcr2ImageProcessor",
    "size": {"height": 448, "width": 448},
    "min_patches": 1,
    "max_patches": 12,
    "image_seq_length": 256,
}


def _internvl3(hidden: int, layers: int, heads: int, kv_heads: int) -> dict[str, Any]:
    """An InternVL3-*-hf config.json: a Qwen2.5 text tower behind InternViT at 448 px."""
    return {
        "model_type": "internvl",
        "torch_dtype": "bfloat16",
        "downsample_ratio": 0.5,
        "image_seq_length": 256,
        "text_config": _text_tower("qwen2", hidden, layers, heads, kv_heads, 32768)
        | {"use_sliding_window": False},
        "vision_config": {
            "model_type": "internvl_vision",
            "image_size": [448, 448],
            "patch_size": [14, 14],
        },
    }


def _split_image_preprocessor(
    processor_type: str, longest_edge_px: int, crop_px: int, image_seq_len: int
) -> dict[str, Any]:
    """An Idefics3-style preprocessor config: longest edge, square crops, tokens a crop."""
    return {
        "image_processor_type": processor_type,
        "do_image_splitting": True,
        "size": {"longest_edge": longest_edge_px},
        "max_image_size": {"longest_edge": crop_px},
        "image_seq_len": image_seq_len,
    }


_LLAMA4_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "Llama4ImageProcessor",
    "size": {"height": 336, "width": 336},
    "max_patches": 16,
    "resize_to_max_canvas": False,
    "patch_size": 14,
    "pixel_shuffle_ratio": 0.5,
}


def _llama4(positions: int, parameter_count: int | None) -> BuiltinModel:
    """A Llama 4 checkpoint: Scout and Maverick share attention, vision and processor."""
    config = {
        "model_type": "llama4",
        "torch_dtype": "bfloat16",
        "text_config": _text_tower("llama4_text", 5120, 48, 40, 8, positions)
        | {"head_dim": 128, "attention_chunk_size": 8192, "no_rope_layers": []},
        "vision_config": {
            "model_type": "llama4_vision_model",
            "image_size": 336,
            "patch_size": 14,
            "pixel_shuffle_ratio": 0.5,
            "vision_output_dim": 4096,
        },
    }
    return BuiltinModel(config, _LLAMA4_PREPROCESSOR, parameter_count)


# GLM-4.1V's preprocessor_config.json values (see GLM-4.1V-9B-Thinking below), which GLM-4.5V,
# GLM-4.6V and GLM-OCR ship too.
_GLM4V_PREPROCESSOR: dict[str, Any] = {
    "image_processor_type": "Glm4vImageProcessor",
    "size": {"shortest_edge": 12544, "longest_edge": 9633792},
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


def _glm4v_vision(model_type: str, out_hidden_size: int) -> dict[str, Any]:
    """A GLM-V vision_config: 14 px patches merged 2 x 2, two frames a patch in time."""
    return {
        "model_type": model_type,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": out_hidden_size,
    }


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    "llava-hf/llava-1.5-7b-hf": BuiltinModel(
        config={
            "model_type": "llava",
            "vision_feature_select_strategy": "default",
            "image_seq_length": 576,
            "text_config": _text_tower("llama", 4096, 32, 32, 32, 4096)
            | {"torch_dtype": "float16"},
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
    "Qwen/Qwen3-VL-2B-Instruct": _qwen3(2048, 28, 16, 8, 2_127_532_032),
    "Qwen/Qwen3-VL-4B-Instruct": _qwen3(2560, 36, 32, 8, 4_437_815_808),
    "Qwen/Qwen3-VL-8B-Instruct": _qwen3(4096, 36, 32, 8, 8_767_123_696),
    "Qwen/Qwen3-VL-32B-Instruct": _qwen3(5120, 64, 64, 8, 33_357_390_064),
    # MoE (128 experts, 8 active; attention is dense, so only it shapes the KV). config.json
    # text_config: 48 layers, 32 heads, 4 KV heads of head_dim 128, hidden 2048, 262,144
    # positions, bfloat16; vision patch 16, merge 2, out_hidden_size 2048: the repository's
    # file at commit 1fc78ad as transcribed into a public parser test, matching the Megatron
    # launch arguments for this checkpoint (48 layers, 4 query groups, kv-channels 128). The
    # processor files are the Qwen3-VL family's. Parameters: 31.07 B, Hugging Face's model
    # listing (rounded; the safetensors index was not read).
    "Qwen/Qwen3-VL-30B-A3B-Instruct": _qwen3(
        2048, 48, 32, 4, 31_070_000_000, model_type="qwen3_vl_moe"
    ),
    # Qwen3.5 / 3.6 text_config values, from public transcriptions of each checkpoint's
    # config.json (parameter counts not read: plan has no weight figure for them).
    # 9B: 32 layers, hidden 4096, 16 heads, 4 KV heads, 32 linear value heads (a deployment's
    # check of the published artifact's topology).
    "Qwen/Qwen3.5-9B": _qwen3_5(4096, 32, 16, 4, 32),
    # 27B: 64 layers, hidden 5120, 24 heads, 4 KV heads, 48 linear value heads (Megatron-Bridge's
    # Qwen3.5-27B test config; slime's launch arguments agree: 24 heads, 4 groups, kv 256).
    "Qwen/Qwen3.5-27B": _qwen3_5(5120, 64, 24, 4, 48),
    # 35B-A3B (MoE, 256 experts): 40 layers, hidden 2048, 16 heads, 2 KV heads (a pinned audit of
    # the public config); 32 linear value heads as in public Qwen3.5-MoE parser tests of that
    # width (medium confidence). Qwen3.6-35B-A3B ships the same text_config layout.
    "Qwen/Qwen3.5-35B-A3B": _qwen3_5(2048, 40, 16, 2, 32, moe=True),
    "Qwen/Qwen3.6-35B-A3B": _qwen3_5(2048, 40, 16, 2, 32, moe=True),
    # 397B-A17B (MoE, 512 experts): 60 layers, hidden 4096, 32 heads, 2 KV heads, 64 linear value
    # heads (the checkpoint's config.json as quoted in a public parallelism analysis).
    "Qwen/Qwen3.5-397B-A17B": _qwen3_5(4096, 60, 32, 2, 64, moe=True),
    # dots.ocr: a flat Qwen2 config (1536 wide, 28 layers, 12 heads, 2 KV heads, 131,072
    # positions; a public parser test's copy of the checkpoint's config.json) with a DotsViT
    # vision_config (patch 14, merge 2, temporal 1: vLLM's DotsVisionConfig); processor
    # Qwen2VLImageProcessor at 3,136 to 11,289,600 px (the value deployments pass as "the
    # processor's max_pixels", 14,400 tokens).
    "rednote-hilab/dots.ocr": BuiltinModel(
        config={
            "architectures": ["DotsOCRForCausalLM"],
            "model_type": "dots_ocr",
            "torch_dtype": "bfloat16",
            **_text_tower("dots_ocr", 1536, 28, 12, 2, 131072),
            "vision_config": {
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 1,
                "hidden_size": 1536,
            },
        },
        preprocessor={
            "image_processor_type": "Qwen2VLImageProcessor",
            "min_pixels": 3136,
            "max_pixels": 11289600,
            "patch_size": 14,
            "temporal_patch_size": 1,
            "merge_size": 2,
        },
    ),
    # config.json: Synthetica-AI/gemma-3-4b-it ("Copy model google/gemma-3-4b-it"); public copies of
    # the 12B/27B text_config (12B: 3840/48/16/8, head_dim default 256; 27B: head_dim 128).
    "google/gemma-3-4b-it": BuiltinModel(_gemma3(2560, 34, 8, 4, 256), _GEMMA3_PREPROCESSOR),
    "google/gemma-3-12b-it": BuiltinModel(_gemma3(3840, 48, 16, 8, 256), _GEMMA3_PREPROCESSOR),
    "google/gemma-3-27b-it": BuiltinModel(_gemma3(5376, 62, 32, 16, 128), _GEMMA3_PREPROCESSOR),
    # Gemma 4 text configs: public copies of each checkpoint's config.json text_config (ports'
    # tests and config dumps; the same values in several independent copies, medium-high
    # confidence): 31B 5376 / 60 layers / 32 heads / 16 KV heads, global 4 KV heads with K = V,
    # window 1024; 26B-A4B (MoE feed-forward) 2816 / 30 / 16 / 8, global 2 with K = V, window
    # 1024; E4B 2560 / 42 / 8 / 2, 18 KV-shared layers, window 512; E2B 1536 / 35 / 8 / 1,
    # 4 sliding : 1 global, 20 KV-shared layers, window 512. KV: tests/renderer/test_kv_geometry.py.
    "google/gemma-4-31B-it": BuiltinModel(
        _gemma4(
            5376,
            60,
            32,
            16,
            positions=262144,
            window=1024,
            pattern=6,
            global_kv_heads=4,
            kv_shared_layers=0,
        ),
        _GEMMA4_PREPROCESSOR,
    ),
    "google/gemma-4-26B-A4B-it": BuiltinModel(
        _gemma4(
            2816,
            30,
            16,
            8,
            positions=262144,
            window=1024,
            pattern=6,
            global_kv_heads=2,
            kv_shared_layers=0,
        ),
        _GEMMA4_PREPROCESSOR,
    ),
    "google/gemma-4-E4B-it": BuiltinModel(
        _gemma4(
            2560,
            42,
            8,
            2,
            positions=131072,
            window=512,
            pattern=6,
            global_kv_heads=None,
            kv_shared_layers=18,
        ),
        _GEMMA4_PREPROCESSOR,
    ),
    "google/gemma-4-E2B-it": BuiltinModel(
        _gemma4(
            1536,
            35,
            8,
            1,
            positions=131072,
            window=512,
            pattern=5,
            global_kv_heads=None,
            kv_shared_layers=20,
        ),
        _GEMMA4_PREPROCESSOR,
    ),
    # config.json: the pixtral-12b values in transformers' LlavaConfig reload test (text
    # num_attention_heads is MistralConfig's default 32); preprocessor:
    # mlx-community/pixtral-12b-8bit, hf-internal-testing/tiny-processor-pixtral;
    # spatial_merge_size: PixtralProcessor's default.
    "mistral-community/pixtral-12b": BuiltinModel(
        config={
            "model_type": "llava",
            "torch_dtype": "bfloat16",
            "text_config": _mistral_text(1024000),
            "vision_config": {"model_type": "pixtral", "image_size": 1024, "patch_size": 16},
        },
        preprocessor=_pixtral_preprocessor(16, 1024, spatial_merge_size=1),
    ),
    # config.json: public Mistral-Small-3.1-24B-Instruct-2503 copies (spatial_merge_size 2,
    # vision image_size 1540, patch 14); preprocessor/processor: Mistral-Small-3.x siblings
    # (patch 14, longest_edge 1540, spatial_merge_size 2).
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": BuiltinModel(
        config={
            "model_type": "mistral3",
            "spatial_merge_size": 2,
            "torch_dtype": "bfloat16",
            "text_config": _mistral_text(131072),
            "vision_config": {"model_type": "pixtral", "image_size": 1540, "patch_size": 14},
        },
        preprocessor=_pixtral_preprocessor(14, 1540, spatial_merge_size=2),
    ),
    # config.json: GLM-4.1V-9B text 4096/40 layers/32 heads/2 KV heads (public copies of the
    # checkpoint's config); 65,536 positions (model card). Preprocessor: public copies
    # (medium confidence: AutoGLM-Phone-9B / GLM-4.6V-Flash copies, same values as the
    # transformers smart_resize defaults 112*112 and 14*14*2*2*2*6144).
    "zai-org/GLM-4.1V-9B-Thinking": BuiltinModel(
        config={
            "model_type": "glm4v",
            "torch_dtype": "bfloat16",
            "text_config": _text_tower("glm4v_text", 4096, 40, 32, 2, 65536),
            "vision_config": {
                "model_type": "glm4v",
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "out_hidden_size": 4096,
            },
        },
        preprocessor=_GLM4V_PREPROCESSOR,
    ),
    # GLM-4.5V (Glm4vMoeForConditionalGeneration, GLM-4.5-Air's MoE tower): text_config 4096
    # wide, 46 layers, 96 heads, 8 KV heads of head_dim 128, 65,536 positions, bfloat16 (a
    # public dump of the checkpoint's Glm4vMoeConfig); vision depth 24, patch 14, merge 2,
    # temporal 2, out_hidden_size 4096 (a public parser test's copy). vLLM 0.33 registers it
    # with Glm4vProcessingInfo; the processor files are GLM-4.1V's (see above).
    "zai-org/GLM-4.5V": BuiltinModel(
        config={
            "architectures": ["Glm4vMoeForConditionalGeneration"],
            "model_type": "glm4v_moe",
            "text_config": _text_tower("glm4v_moe_text", 4096, 46, 96, 8, 65536)
            | {"head_dim": 128, "dtype": "bfloat16"},
            "vision_config": {
                "model_type": "glm4v_moe",
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "out_hidden_size": 4096,
            },
        },
        preprocessor=_GLM4V_PREPROCESSOR,
    ),
    # config.json: model_type, pinpoints and the "default" strategy as in the repo's file (copies in
    # laion/llava-v1.6-mistral-7b_openvino_int8, Ayush374/quantised_llava); the text tower is
    # Mistral-7B-Instruct-v0.2: 32 layers, 32 heads, 8 KV heads of 128, 32,768 positions, no
    # sliding window. Preprocessor + processor_config.json values: the same copies.
    "llava-hf/llava-v1.6-mistral-7b-hf": BuiltinModel(
        config={
            "model_type": "llava_next",
            "torch_dtype": "float16",
            "vision_feature_select_strategy": "default",
            "image_grid_pinpoints": _LLAVA_NEXT_PINPOINTS,
            "text_config": _text_tower("mistral", 4096, 32, 32, 8, 32768)
            | {"sliding_window": None},
            "vision_config": {
                "model_type": "clip_vision_model",
                "image_size": 336,
                "patch_size": 14,
            },
        },
        preprocessor={
            "image_processor_type": "LlavaNextImageProcessor",
            "size": {"shortest_edge": 336},
            "crop_size": {"height": 336, "width": 336},
            "image_grid_pinpoints": _LLAVA_NEXT_PINPOINTS,
            "do_pad": True,
            "patch_size": 14,
            "vision_feature_select_strategy": "default",
            "num_additional_image_tokens": 1,
        },
    ),
    # config.json: pinpoints from mgoin/llava-onevision-qwen2-7b-ov-hf-bnb-full-4bit
    # (_name_or_path llava-hf/llava-onevision-qwen2-7b-ov-hf); text tower Qwen2-7B-Instruct:
    # 28 layers, 28 heads, 4 KV heads of 128, 32,768 positions. Processor values:
    # the same repository's (num_image_tokens 729, "full", anyres_max_9).
    "llava-hf/llava-onevision-qwen2-7b-ov-hf": BuiltinModel(
        config={
            "model_type": "llava_onevision",
            "torch_dtype": "float16",
            "vision_feature_select_strategy": "full",
            "vision_aspect_ratio": "anyres_max_9",
            "image_grid_pinpoints": _LLAVA_ONEVISION_PINPOINTS,
            "text_config": _text_tower("qwen2", 3584, 28, 28, 4, 32768)
            | {"use_sliding_window": False},
            "vision_config": {
                "model_type": "siglip_vision_model",
                "image_size": 384,
                "patch_size": 14,
            },
        },
        preprocessor={
            "image_processor_type": "LlavaOnevisionImageProcessor",
            "size": {"height": 384, "width": 384},
            "image_grid_pinpoints": _LLAVA_ONEVISION_PINPOINTS,
            "do_pad": True,
            "num_image_tokens": 729,
            "vision_feature_select_strategy": "full",
            "vision_aspect_ratio": "anyres_max_9",
        },
    ),
    # InternVL3-*-hf: text towers are Qwen2.5 0.5B / 1.5B / 7B / 14B / 32B / 72B (the original
    # InternVL3 configs' llm_config, 32,768 positions); 9B (InternLM3) has no -hf conversion here.
    "OpenGVLab/InternVL3-1B-hf": BuiltinModel(_internvl3(896, 24, 14, 2), _INTERNVL3_PREPROCESSOR),
    "OpenGVLab/InternVL3-2B-hf": BuiltinModel(_internvl3(1536, 28, 12, 2), _INTERNVL3_PREPROCESSOR),
    "OpenGVLab/InternVL3-8B-hf": BuiltinModel(_internvl3(3584, 28, 28, 4), _INTERNVL3_PREPROCESSOR),
    "OpenGVLab/InternVL3-14B-hf": BuiltinModel(
        _internvl3(5120, 48, 40, 8), _INTERNVL3_PREPROCESSOR
    ),
    "OpenGVLab/InternVL3-38B-hf": BuiltinModel(
        _internvl3(5120, 64, 40, 8), _INTERNVL3_PREPROCESSOR
    ),
    "OpenGVLab/InternVL3-78B-hf": BuiltinModel(
        _internvl3(8192, 80, 64, 8), _INTERNVL3_PREPROCESSOR
    ),
    # config.json: Llama-3.1-8B-Instruct text tower (32 layers, 32 heads, 8 KV heads of 128,
    # 131,072 positions); SigLIP at 364 px, patch 14, scale_factor 2 -> 169 tokens a crop.
    # Preprocessor: public copies (1456 / 364, medium confidence).
    "HuggingFaceM4/Idefics3-8B-Llama3": BuiltinModel(
        config={
            "model_type": "idefics3",
            "torch_dtype": "bfloat16",
            "scale_factor": 2,
            "text_config": _text_tower("llama", 4096, 32, 32, 8, 131072),
            "vision_config": {"model_type": "idefics3_vision", "image_size": 364, "patch_size": 14},
        },
        preprocessor=_split_image_preprocessor("Idefics3ImageProcessor", 1456, 364, 169),
    ),
    # config.json: SmolLM2-1.7B-based text tower (24 layers, 32 heads, 32 KV heads of 64,
    # 16,384 positions; the SmolVLM 2B text config as quoted in public ports); SigLIP at 384 px,
    # patch 14, scale_factor 3 -> 81 tokens a crop. Preprocessor: the same ports.
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct": BuiltinModel(
        config={
            "model_type": "smolvlm",
            "torch_dtype": "bfloat16",
            "scale_factor": 3,
            "text_config": _text_tower("llama", 2048, 24, 32, 32, 16384) | {"head_dim": 64},
            "vision_config": {"model_type": "smolvlm_vision", "image_size": 384, "patch_size": 14},
        },
        preprocessor=_split_image_preprocessor("SmolVLMImageProcessor", 1536, 384, 81),
    ),
    # config.json text_config: 48 layers, 40 heads, 8 KV heads of 128, attention_chunk_size 8192,
    # no_rope_layers [] (so every 4th layer is global NoPE; the other 36 are chunked), as in the
    # Llama-4-Scout-17B-16E config.json quoted in AMD-AGI/Primus#165; the Instruct model's
    # 10,485,760 positions (40x the base model's, huggingface/text-generation-inference#3245).
    # Vision: 336 px, patch 14, pixel_shuffle_ratio 0.5 (the same config's vision_config).
    # Processor values: Llama4ImageProcessor / Llama4Processor class defaults (transformers).
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": _llama4(10485760, None),
    # MoE in every other layer (128 experts); attention as Scout's: 48 layers, 40 heads, 8 KV
    # heads of 128, attention_chunk_size 8192, default NoPE interval 4, bfloat16; 1,048,576
    # positions; vision_config as Scout's (336 px, patch 14, pixel_shuffle_ratio 0.5). Source:
    # the Llama-4-Maverick config copied into TensorRT-LLM's Llama 4 tests (cut to 2 layers
    # there, "reduced ... from 48 layers"). Parameters: 400 B total, 17 B active (Meta's
    # model card; rounded). Processor: the Llama 4 family's (Scout's).
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": _llama4(1048576, 400_000_000_000),
    # GLM-4.6V (Glm4vMoeForConditionalGeneration, 106B): GLM-4.5V's architecture at the same
    # scale with a 128K window: vLLM's recipe for zai-org/GLM-4.6V gives 128K ("you can push to
    # 131072") against GLM-4.5V's 64K; Megatron-Bridge gives GLM-4.5V's 106B tower as 46 layers,
    # 4096 wide, 96 heads, 8 query groups; head_dim 128 as GLM-4.5-Air's config. Medium
    # confidence: the 4.6V config.json itself was not read. Processor files: GLM-4.1V's.
    "zai-org/GLM-4.6V": BuiltinModel(
        config={
            "architectures": ["Glm4vMoeForConditionalGeneration"],
            "model_type": "glm4v_moe",
            "text_config": _text_tower("glm4v_moe_text", 4096, 46, 96, 8, 131072)
            | {"head_dim": 128, "dtype": "bfloat16"},
            "vision_config": _glm4v_vision("glm4v_moe", 4096),
        },
        preprocessor=_GLM4V_PREPROCESSOR,
    ),
    # GLM-4.6V-Flash (Glm4vForConditionalGeneration, 9B): the GLM-4.1V-9B-Thinking architecture
    # (zai-org/GLM-V#220: "tested, it is the same"), a 128K window (the model card); parameters:
    # the Hugging Face API's safetensors total, as a public model survey quotes it. Medium
    # confidence for the window (131,072 positions taken from "128K").
    "zai-org/GLM-4.6V-Flash": BuiltinModel(
        config={
            "architectures": ["Glm4vForConditionalGeneration"],
            "model_type": "glm4v",
            "torch_dtype": "bfloat16",
            "text_config": _text_tower("glm4v_text", 4096, 40, 32, 2, 131072),
            "vision_config": _glm4v_vision("glm4v", 4096),
        },
        preprocessor=_GLM4V_PREPROCESSOR,
        parameter_count=10_292_777_472,
    ),
    # Kimi-K2.5 (KimiK25ForConditionalGeneration): a Kimi-K2 (DeepSeek-V3-shaped) text_config,
    # 7168 wide, 61 layers, 64 heads, 64 KV heads (TensorRT-LLM's Kimi-K2.5 test config,
    # "matches real config.json structure"; the model card's 61 layers, 7168, 64 heads), 262,144
    # positions (the card's 256K context: YaRN x64 from a 4K base); MoonViT, 14 px patches
    # merged 2 x 2. preprocessor_config.json's media_proc_cfg: 16,384 patches, 512 a side, patch
    # 14, merge 2, no fixed output (the same defaults in several public ports of the ckpt-side
    # processor): high confidence. KV: MLA's latent (kv_lora_rank + qk_rope_head_dim a token a
    # layer), as vLLM caches it.
    "moonshotai/Kimi-K2.5": BuiltinModel(
        config={
            "architectures": ["KimiK25ForConditionalGeneration"],
            "model_type": "kimi_k25",
            "torch_dtype": "bfloat16",
            "text_config": _text_tower("deepseek_v3", 7168, 61, 64, 64, 262144)
            | {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64},
            "vision_config": {
                "model_type": "kimi_k25_vision",
                "patch_size": 14,
                "merge_kernel_size": [2, 2],
            },
        },
        preprocessor={
            "media_proc_cfg": {
                "in_patch_limit": 16384,
                "patch_size": 14,
                "merge_kernel_size": 2,
                "fixed_output_tokens": None,
                "patch_limit_on_one_side": 512,
            },
        },
    ),
    # Kimi-VL-A3B-Instruct (KimiVLForConditionalGeneration): a Moonlight (DeepSeek-V3-shaped)
    # text_config, 2048 wide, 27 layers, 16 heads, 16 KV heads (MLA: kv_lora_rank 512, rope 64),
    # 131,072 positions; MoonViT, 14 px patches merged 2 x 2 (public bring-up and KV-sizing tests
    # built from the checkpoint's config, which agree): medium-high confidence. Image processor:
    # 4,096 patches, padded input (the real processor config of a Kimi-VL-A3B-Instruct fine-tune,
    # quoted in a public test): medium confidence. KV: MLA's latent, as vLLM caches it.
    # Thinking-2506's 16,384-patch processor file was not found in a
    # public copy, so it has no built-in.
    "moonshotai/Kimi-VL-A3B-Instruct": BuiltinModel(
        config={
            "architectures": ["KimiVLForConditionalGeneration"],
            "model_type": "kimi_vl",
            "torch_dtype": "bfloat16",
            "text_config": _text_tower("deepseek_v3", 2048, 27, 16, 16, 131072)
            | {"kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64},
            "vision_config": {
                "model_type": "moonvit",
                "patch_size": 14,
                "merge_kernel_size": [2, 2],
            },
        },
        preprocessor={
            "image_processor_type": "KimiVLImageProcessor",
            "in_token_limit": 4096,
            "merge_kernel_size": [2, 2],
            "pad_input": True,
            "patch_size": 14,
        },
    ),
    # --- OCR models -------------------------------------------------------------------------
    # GLM-OCR (GlmOcrForConditionalGeneration, vLLM's Glm4vProcessingInfo): text_config 1536
    # wide, 16 layers, 16 heads, 8 KV heads of head_dim 128, 131,072 positions, bfloat16;
    # vision patch 14, merge 2, temporal 2, out_hidden_size 1536. Source: the repository's
    # config.json as fetched (curl of zai-org/GLM-OCR) in two independent public transcripts
    # (one of a 4-bit re-quantisation, same text_config): high confidence. Processor: GLM-4.1V's
    # bounds (12,544 to 9,633,792 px), as a public GLM-OCR port states them ("min 12544, max
    # 9633792"): medium confidence.
    "zai-org/GLM-OCR": BuiltinModel(
        config={
            "architectures": ["GlmOcrForConditionalGeneration"],
            "model_type": "glm_ocr",
            "text_config": _text_tower("glm_ocr_text", 1536, 16, 16, 8, 131072)
            | {"head_dim": 128, "dtype": "bfloat16"},
            "vision_config": _glm4v_vision("glm_ocr_vision", 1536),
        },
        preprocessor=_GLM4V_PREPROCESSOR,
    ),
    # PaddleOCR-VL: the checkpoint's flat config (the ERNIE-4.5-0.3B text values at the top:
    # 1024 wide, 18 layers, 16 heads, 2 KV heads of head_dim 128, 131,072 positions), a
    # SigLIP-style vision_config of 14 px patches merged 2 x 2. Source: a public parser test's
    # subset of the PaddleOCR-VL config and transformers' PaddleOCRTextConfig defaults, which
    # agree: high confidence. preprocessor_config.json: 147,384 to 2,822,400 px, patch 14,
    # merge 2 (the file as quoted in a public deployment review; the same values, with temporal
    # patch 1, as an SDK's documented processor defaults): high confidence.
    "PaddlePaddle/PaddleOCR-VL": BuiltinModel(
        config={
            "architectures": ["PaddleOCRVLForConditionalGeneration"],
            "model_type": "paddleocr_vl",
            "torch_dtype": "bfloat16",
            **_text_tower("paddleocr_vl", 1024, 18, 16, 2, 131072),
            "head_dim": 128,
            "vision_config": {
                "model_type": "paddleocr_vl_vision",
                "patch_size": 14,
                "spatial_merge_size": 2,
            },
        },
        preprocessor={
            "image_processor_type": "PaddleOCRVLImageProcessor",
            "min_pixels": 147384,
            "max_pixels": 2822400,
            "patch_size": 14,
            "merge_size": 2,
            "temporal_patch_size": 1,
        },
    ),
    # DeepSeek-OCR (DeepseekOCRForCausalLM, model_type deepseek_vl_v2): language_config is a
    # DeepSeek-V2 MoE tower without MLA, 1280 wide, 12 layers, 10 heads, 10 KV heads, 8,192
    # positions (the repository's config.json "transcribed from the live repo" in a public
    # loader test): high confidence. The image arithmetic is vLLM's module constants, none
    # of it read from the files. processor_config.json: DeepseekVLV2Processor's 16 px patches,
    # downsample 4, one 1,024 px candidate resolution, as a public deployment review quotes
    # DeepSeek-OCR-2's file (the sidecar reads none of it for this family).
    "deepseek-ai/DeepSeek-OCR": BuiltinModel(
        config={
            "architectures": ["DeepseekOCRForCausalLM"],
            "model_type": "deepseek_vl_v2",
            "torch_dtype": "bfloat16",
            "candidate_resolutions": [[1024, 1024]],
            "language_config": _text_tower("deepseek_v2", 1280, 12, 10, 10, 8192)
            | {"kv_lora_rank": None, "q_lora_rank": None, "use_mla": False},
            "vision_config": {"model_type": "vision", "image_size": 1024},
        },
        preprocessor={
            "processor_class": "DeepseekVLV2Processor",
            "candidate_resolutions": [[1024, 1024]],
            "downsample_ratio": 4,
            "patch_size": 16,
        },
    ),
    # LightOnOCR-1B-1025 (LightOnOCRForConditionalGeneration; its config.json says model_type
    # mistral3): a Pixtral tower at 1,540 px, patch 14, spatial_merge_size 2, in front of a
    # Qwen3-0.6B-shaped decoder (1024 wide, 28 layers, 16 heads, 8 KV heads of head_dim 128,
    # 40,960 positions). Source: transformers' LightOnOcrConfig sub-config defaults (the
    # checkpoint's values as the port transcribed them) for both towers: medium confidence.
    "lightonai/LightOnOCR-1B-1025": BuiltinModel(
        config={
            "architectures": ["LightOnOCRForConditionalGeneration"],
            "model_type": "mistral3",
            "spatial_merge_size": 2,
            "torch_dtype": "bfloat16",
            "text_config": _text_tower("qwen3", 1024, 28, 16, 8, 40960) | {"head_dim": 128},
            "vision_config": {"model_type": "pixtral", "image_size": 1540, "patch_size": 14},
        },
        preprocessor=_pixtral_preprocessor(14, 1540, spatial_merge_size=2),
    ),
    # --- Other served families -----------------------------------------------------------------
    # Ovis2.5-9B (Ovis2_5): vit_config patch 16, hidden_stride 2, temporal 1 and an llm_config
    # of Qwen3 (head_dim 128, 40,960 positions, bfloat16), as transformers' Ovis 2.5 conversion
    # test builds the released checkpoints' source config; the 9B's tower is Qwen3-8B (36
    # layers, 4096 wide, 32 heads, 8 KV heads: the Qwen3-8B config.json as a public model
    # survey transcribes it). The image bounds are the processor's own constants (448² to
    # 1,792² px, the same test's 9B max_pixels). Medium-high confidence.
    "AIDC-AI/Ovis2.5-9B": BuiltinModel(
        config={
            "architectures": ["Ovis2_5"],
            "model_type": "ovis2_5",
            "torch_dtype": "bfloat16",
            "vit_config": {"patch_size": 16, "hidden_stride": 2, "temporal_patch_size": 1},
            "llm_config": _text_tower("qwen3", 4096, 36, 32, 8, 40960)
            | {"head_dim": 128, "torch_dtype": "bfloat16"},
        },
        preprocessor={"image_processor_type": "SiglipImageProcessor"},
    ),
    # Phi-4-multimodal-instruct (Phi4MMForCausalLM): a flat Phi-4-mini config, 3072 wide, 32
    # layers, 24 heads, 8 KV heads (head_dim 128), 131,072 positions (LongRoPE from 4,096),
    # bfloat16; SigLIP at 448 px crops (embd_layer.image_embd_layer.crop_size). Source: public
    # copies of the checkpoint's config.json (one cut to 2 layers, "original: 32") and parser
    # tests that agree: high confidence. preprocessor_config.json's dynamic_hd 36: Microsoft's
    # fine-tuning sample writes the checkpoint's file with it: high confidence.
    "microsoft/Phi-4-multimodal-instruct": BuiltinModel(
        config={
            "architectures": ["Phi4MMForCausalLM"],
            "model_type": "phi4mm",
            "torch_dtype": "bfloat16",
            **_text_tower("phi4mm", 3072, 32, 24, 8, 131072),
            "original_max_position_embeddings": 4096,
            "partial_rotary_factor": 0.75,
            "img_processor": None,
            "embd_layer": {
                "embedding_cls": "image_audio",
                "image_embd_layer": {"crop_size": 448, "use_hd_transform": True},
            },
        },
        preprocessor={"image_processor_type": "Phi4MMImageProcessor", "dynamic_hd": 36},
    ),
    # MiniCPM-V-4.6 (MiniCPMV4_6ForConditionalGeneration): a Qwen3.5 text_config, 1024 wide, 24
    # layers (every 4th full attention: 8 heads, 2 KV heads of head_dim 256; the others Gated
    # DeltaNet with 16 key and 16 value heads of 128, conv 4), 262,144 positions: the real
    # text_config subset of a public 4-bit conversion, as a parser test quotes it (high
    # confidence). No mamba_ssm_dtype: vLLM applies that key to Qwen3.5's own architectures
    # only, so this model's state is in the model dtype. Image processor: transformers'
    # MiniCPMV4_6ImageProcessor class defaults (9 slices of 448 px, patch 14, 16x); the
    # checkpoint's own preprocessor_config.json was not read: medium confidence.
    "openbmb/MiniCPM-V-4.6": BuiltinModel(
        config={
            "architectures": ["MiniCPMV4_6ForConditionalGeneration"],
            "model_type": "minicpmv4_6",
            "torch_dtype": "bfloat16",
            "insert_layer_id": 6,
            "text_config": _text_tower("qwen3_5_text", 1024, 24, 8, 2, 262144)
            | {
                "head_dim": 256,
                "full_attention_interval": 4,
                "linear_conv_kernel_dim": 4,
                "linear_key_head_dim": 128,
                "linear_num_key_heads": 16,
                "linear_num_value_heads": 16,
                "linear_value_head_dim": 128,
            },
            "vision_config": {
                "model_type": "minicpmv4_6_vision",
                "image_size": 980,
                "patch_size": 14,
            },
        },
        preprocessor={
            "image_processor_type": "MiniCPMV4_6ImageProcessor",
            "max_slice_nums": 9,
            "scale_resolution": 448,
            "patch_size": 14,
            "slice_mode": True,
            "downsample_mode": "16x",
            "use_image_id": True,
        },
    ),
}
