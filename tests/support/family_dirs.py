"""Model directories for the new families, written offline: public config values and a
tokenizer holding the family's special tokens.

Neither the checkpoints nor their tokenizers can be downloaded here, so each directory holds
the checkpoint's public ``config.json`` and processor values (the numbers that reach the
image arithmetic are the shipped ones; the towers are shrunk, since only the processor runs)
and a word-level tokenizer whose vocabulary is the family's special tokens and a few words:
the image placeholders, wrappers and context tokens are single tokens, as in the real ones.
Shared by the renderer tier (vLLM's processor reads them) and the unit tests.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, models, pre_tokenizers

from sidecar.vision import VLLM_MAX_IMAGE_PIXELS

WORDS = ("hello", "describe", "the", "image", "please", "\n")


def write_tokenizer(
    directory: Path, special_tokens: Sequence[str], config: Mapping[str, Any]
) -> dict[str, int]:
    """``tokenizer.json`` (special tokens first, then ``WORDS``) and ``tokenizer_config.json``;
    returns the vocabulary."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate([*special_tokens, *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=special_tokens[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(list(special_tokens))
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(dict(config)))
    return vocab


def write_json(directory: Path, name: str, value: Mapping[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(value))


# -- Gemma 4 --------------------------------------------------------------------------------

GEMMA4_SPECIAL = (
    "<unk>", "<pad>", "<eos>", "<bos>", "<|image|>", "<|image>", "<image|>", "<|video|>",
    "<|audio|>", "<|audio>", "<audio|>",
)  # fmt: skip
GEMMA4_PROMPT = "hello <|image|> describe"


def gemma4_config(vocab: Mapping[str, int], *, default_output_length: int = 280) -> dict[str, Any]:
    """google/gemma-4-*-it's config.json: the vision values every size ships (16 px patches
    pooled 3x3, 280 soft tokens by default); a two-layer text tower."""
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "boi_token_id": vocab["<|image>"],
        "eoi_token_id": vocab["<image|>"],
        "image_token_id": vocab["<|image|>"],
        "video_token_id": vocab["<|video|>"],
        "audio_config": None,
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "gemma4_text",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "vocab_size": len(vocab),
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 512,
            "max_position_embeddings": 131072,
        },
        "vision_config": {
            "model_type": "gemma4_vision",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "patch_size": 16,
            "pooling_kernel_size": 3,
            "default_output_length": default_output_length,
            "position_embedding_size": 10240,
        },
    }


def write_gemma4_dir(directory: Path, *, default_output_length: int = 280) -> Path:
    vocab = write_tokenizer(
        directory,
        GEMMA4_SPECIAL,
        {
            "tokenizer_class": "GemmaTokenizer",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "extra_special_tokens": {
                "image_token": "<|image|>",
                "boi_token": "<|image>",
                "eoi_token": "<image|>",
                "audio_token": "<|audio|>",
                "boa_token": "<|audio>",
                "eoa_token": "<audio|>",
            },
        },
    )
    write_json(
        directory, "config.json", gemma4_config(vocab, default_output_length=default_output_length)
    )
    write_json(
        directory,
        "processor_config.json",
        {
            "processor_class": "Gemma4Processor",
            "image_seq_length": 280,
            "image_processor": {
                "image_processor_type": "Gemma4ImageProcessor",
                "patch_size": 16,
                "max_soft_tokens": 280,
                "pooling_kernel_size": 3,
                "do_rescale": True,
                "rescale_factor": 1 / 255,
                "do_normalize": False,
                "do_convert_rgb": True,
                "resample": 3,
            },
            "feature_extractor": {"feature_extractor_type": "Gemma4AudioFeatureExtractor"},
            "video_processor": {"video_processor_type": "Gemma4VideoProcessor"},
        },
    )
    return directory


# -- Gemma 3n -------------------------------------------------------------------------------

# Gemma's tokenizer spells runs of newlines as single tokens; vLLM's Gemma 3n processor looks
# them up by name to merge its "\n\n" frame with the text's newlines.
GEMMA3N_SPECIAL = (
    "<unk>", "<pad>", "<eos>", "<bos>", "<image_soft_token>", "<start_of_image>",
    "<end_of_image>", "<audio_soft_token>", "<start_of_audio>", "<end_of_audio>",
    "\n\n\n\n", "\n\n\n", "\n\n", "\n",
)  # fmt: skip
GEMMA3N_PROMPT = "hello <image_soft_token> describe"


def write_gemma3n_dir(directory: Path) -> Path:
    """google/gemma-3n-E4B-it: 768 px SigLIP-style resize, 256 soft tokens per image."""
    vocab = write_tokenizer(
        directory,
        GEMMA3N_SPECIAL,
        {
            "tokenizer_class": "GemmaTokenizer",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "extra_special_tokens": {
                "image_token": "<image_soft_token>",
                "boi_token": "<start_of_image>",
                "eoi_token": "<end_of_image>",
                "audio_token": "<audio_soft_token>",
                "boa_token": "<start_of_audio>",
                "eoa_token": "<end_of_audio>",
            },
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Gemma3nForConditionalGeneration"],
            "model_type": "gemma3n",
            "torch_dtype": "bfloat16",
            "vision_soft_tokens_per_image": 256,
            "audio_soft_tokens_per_image": 188,
            "boi_token_id": vocab["<start_of_image>"],
            "eoi_token_id": vocab["<end_of_image>"],
            "image_token_id": vocab["<image_soft_token>"],
            "boa_token_id": vocab["<start_of_audio>"],
            "eoa_token_id": vocab["<end_of_audio>"],
            "audio_token_id": vocab["<audio_soft_token>"],
            "text_config": {
                "model_type": "gemma3n_text",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab),
                "vocab_size_per_layer_input": len(vocab),
                "hidden_size_per_layer_input": 8,
                "layer_types": ["sliding_attention", "full_attention"],
                "sliding_window": 512,
                "num_kv_shared_layers": 0,
                "laurel_rank": 4,
                "altup_num_inputs": 4,
                "activation_sparsity_pattern": [0.0, 0.0],
                "max_position_embeddings": 32768,
            },
            "vision_config": {"model_type": "gemma3n_vision", "hidden_size": 64},
            "audio_config": {"model_type": "gemma3n_audio", "hidden_size": 64},
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {
            "processor_class": "Gemma3nProcessor",
            "image_seq_length": 256,
            "audio_seq_length": 188,
            "image_processor": {
                "image_processor_type": "SiglipImageProcessor",
                "size": {"height": 768, "width": 768},
                "do_resize": True,
                "do_rescale": True,
                "rescale_factor": 1 / 255,
                "do_normalize": False,
                "resample": 2,
            },
            "feature_extractor": {"feature_extractor_type": "Gemma3nAudioFeatureExtractor"},
        },
    )
    return directory


# -- PaddleOCR-VL ---------------------------------------------------------------------------

PADDLE_SPECIAL = (
    "<unk>", "</s>", "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_START|>", "<|IMAGE_END|>",
)  # fmt: skip
PADDLE_PROMPT = "hello <|IMAGE_START|> <|IMAGE_PLACEHOLDER|> <|IMAGE_END|> describe"


def write_paddleocr_vl_dir(directory: Path) -> Path:
    """PaddlePaddle/PaddleOCR-VL: a SigLIP-style tower of 14 px patches merged 2 x 2, images
    resized into [147,384, 2,822,400] px; a two-layer ERNIE text tower."""
    vocab = write_tokenizer(
        directory,
        PADDLE_SPECIAL,
        {
            "tokenizer_class": "LlamaTokenizer",
            "unk_token": "<unk>",
            "eos_token": "</s>",
            "extra_special_tokens": {"image_token": "<|IMAGE_PLACEHOLDER|>"},
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["PaddleOCRVLForConditionalGeneration"],
            "model_type": "paddleocr_vl",
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<|IMAGE_PLACEHOLDER|>"],
            "vision_config": {
                "model_type": "paddleocr_vl_vision",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "patch_size": 14,
                "spatial_merge_size": 2,
            },
            "text_config": {
                "model_type": "paddleocr_vl_text",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab),
                "max_position_embeddings": 131072,
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "PaddleOCRVLImageProcessor",
            "min_pixels": 147384,
            "max_pixels": 2822400,
            "patch_size": 14,
            "merge_size": 2,
            "temporal_patch_size": 1,
            "do_rescale": True,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "resample": 3,
        },
    )
    write_json(directory, "processor_config.json", {"processor_class": "PaddleOCRVLProcessor"})
    return directory


# -- sizes ----------------------------------------------------------------------------------

EXTREME_SIZES = (
    (1, 1), (2, 1), (1, 2), (3, 900), (900, 3), (1, 16384), (16384, 1), (47, 47), (48, 48),
    (224, 224), (448, 448), (449, 447), (896, 448), (1000, 1), (1, 1000), (4032, 3024),
    (3024, 4032), (7680, 4320), (13377, 13377), (89478, 2000), (2000, 89478), (178956, 1000),
)  # fmt: skip


def random_sizes(seed: int, count: int, *, largest_side: int = 16384) -> list[tuple[int, int]]:
    """``count`` sizes, sides log-uniform over 1..``largest_side`` px, within vLLM's pixel limit."""
    rng = random.Random(seed)
    sizes: list[tuple[int, int]] = []
    while len(sizes) < count:
        width = round(largest_side ** rng.random())
        height = round(largest_side ** rng.random())
        if width * height <= VLLM_MAX_IMAGE_PIXELS:
            sizes.append((width, height))
    return sizes


# -- InternVL chat format (InternVLChatModel, Eagle 2.5, Skywork-R1V) -----------------------

INTERNVL_SPECIAL = ("<unk>", "<|endoftext|>", "<img>", "</img>", "<IMG_CONTEXT>", "<image>")
INTERNVL_PROMPT = "hello <image> describe"

# The checkpoints' remote config class, cut to what vLLM's processor reads (their
# configuration_*.py files ship with the checkpoint and build llm_config from its
# architectures; every text tower here is Qwen2).
_CHAT_CONFIG_MODULE = """
from transformers import PretrainedConfig, Qwen2Config


class VisionConfig(PretrainedConfig):
    model_type = "{vision_model_type}"

    def __init__(self, image_size=448, patch_size=14, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size


class ChatConfig(PretrainedConfig):
    model_type = "{model_type}"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, downsample_ratio=0.5,
                 force_image_size=None, min_dynamic_patch=1, max_dynamic_patch=6,
                 dynamic_image_size=False, use_thumbnail=False, template=None,
                 ps_version="v1", **kwargs):
        super().__init__(**kwargs)
        self.vision_config = VisionConfig(**(vision_config or {{}}))
        self.llm_config = Qwen2Config(**(llm_config or {{}}))
        self.downsample_ratio = downsample_ratio
        self.force_image_size = force_image_size
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.template = template
        self.ps_version = ps_version

    def to_dict(self):
        output = super().to_dict()
        output["vision_config"] = self.vision_config.to_dict()
        output["llm_config"] = self.llm_config.to_dict()
        return output
"""


def internvl_chat_config(
    vocab: Mapping[str, int],
    *,
    architecture: str = "InternVLChatModel",
    model_type: str = "internvl_chat",
    vision: Mapping[str, Any] | None = None,
    **values: Any,
) -> dict[str, Any]:
    """OpenGVLab/InternVL3-8B's config.json values (448 px InternViT tiles of 14 px patches,
    pixel-shuffled by 0.5 to 256 tokens, 1-12 tiles + thumbnail); a two-layer Qwen2 tower.
    ``values`` override the top-level keys (another checkpoint's)."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "auto_map": {"AutoConfig": "configuration_chat.ChatConfig"},
        "torch_dtype": "bfloat16",
        "downsample_ratio": 0.5,
        "force_image_size": 448,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 12,
        "dynamic_image_size": True,
        "use_thumbnail": True,
        "template": "internvl2_5",
        "ps_version": "v2",
        "vision_config": {"image_size": 448, "patch_size": 14, **(vision or {})},
        "llm_config": {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": len(vocab),
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
        },
        **values,
    }


def write_internvl_chat_dir(
    directory: Path,
    *,
    architecture: str = "InternVLChatModel",
    model_type: str = "internvl_chat",
    vision_model_type: str = "intern_vit_6b",
    vision: Mapping[str, Any] | None = None,
    **values: Any,
) -> Path:
    vocab = write_tokenizer(
        directory,
        INTERNVL_SPECIAL,
        {"tokenizer_class": "Qwen2Tokenizer", "unk_token": "<unk>", "eos_token": "<|endoftext|>"},
    )
    config = internvl_chat_config(
        vocab, architecture=architecture, model_type=model_type, vision=vision, **values
    )
    write_json(directory, "config.json", config)
    (directory / "configuration_chat.py").write_text(
        _CHAT_CONFIG_MODULE.format(model_type=model_type, vision_model_type=vision_model_type)
    )
    return directory


def write_eagle2_5_dir(directory: Path, **values: Any) -> Path:
    """nvidia/Eagle2.5-8B: a SigLIP tower at 448 px, InternVL's tiler (1-12 + thumbnail)."""
    return write_internvl_chat_dir(
        directory,
        architecture="Eagle2_5_VLForConditionalGeneration",
        model_type="eagle_2_5_vl",
        vision_model_type="siglip_vision_model",
        **values,
    )


def write_skywork_r1v_dir(directory: Path) -> Path:
    """Skywork/Skywork-R1V-38B: InternViT at 448 px, 1-12 tiles + thumbnail."""
    return write_internvl_chat_dir(
        directory, architecture="SkyworkR1VChatModel", model_type="skywork_chat"
    )


# -- Ovis 2.5 -------------------------------------------------------------------------------

OVIS_SPECIAL = ("<unk>", "<|endoftext|>", "<image>", "<video>")
OVIS_PROMPT = "hello <image> describe"

_OVIS_CONFIG_MODULE = """
from transformers import PretrainedConfig, Qwen3Config


class VitConfig(PretrainedConfig):
    model_type = "siglip2_navit"

    def __init__(self, patch_size=16, hidden_stride=2, temporal_patch_size=1, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.hidden_stride = hidden_stride
        self.temporal_patch_size = temporal_patch_size


class Ovis2_5Config(PretrainedConfig):
    model_type = "ovis2_5"
    is_composition = True

    def __init__(self, llm_config=None, vit_config=None, visual_vocab_size=65536, **kwargs):
        super().__init__(**kwargs)
        self.vit_config = VitConfig(**(vit_config or {}))
        self.llm_config = Qwen3Config(**(llm_config or {}))
        self.visual_vocab_size = visual_vocab_size

    def to_dict(self):
        output = super().to_dict()
        output["vit_config"] = self.vit_config.to_dict()
        output["llm_config"] = self.llm_config.to_dict()
        return output
"""


def write_ovis2_5_dir(directory: Path) -> Path:
    """AIDC-AI/Ovis2.5-9B: a SigLIP2 NaViT of 16 px patches merged 2 x 2 (hidden_stride), images
    resized into [448², 1792²] px; a two-layer Qwen3 text tower."""
    vocab = write_tokenizer(
        directory,
        OVIS_SPECIAL,
        {"tokenizer_class": "Qwen2Tokenizer", "unk_token": "<unk>", "eos_token": "<|endoftext|>"},
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Ovis2_5"],
            "model_type": "ovis2_5",
            "auto_map": {"AutoConfig": "configuration_ovis2_5.Ovis2_5Config"},
            "torch_dtype": "bfloat16",
            "visual_vocab_size": 65536,
            "vit_config": {"patch_size": 16, "hidden_stride": 2, "temporal_patch_size": 1},
            "llm_config": {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 40960,
                "torch_dtype": "bfloat16",
            },
        },
    )
    (directory / "configuration_ovis2_5.py").write_text(_OVIS_CONFIG_MODULE)
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "SiglipImageProcessor",
            "do_resize": True,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "resample": 3,
            "size": {"height": 512, "width": 512},
        },
    )
    return directory


# -- Kimi-K2.5 ------------------------------------------------------------------------------

KIMI_K25_SPECIAL = (
    "[UNK]", "[EOS]", "<|im_user|>", "<|im_middle|>", "<|im_end|>", "<|media_begin|>",
    "<|media_content|>", "<|media_end|>", "<|media_pad|>", "<|kimi_k25_video_placeholder|>",
)  # fmt: skip
# The chat template's image: <|media_begin|>image<|media_content|><|media_pad|><|media_end|>
# (vLLM's KimiK25ForConditionalGeneration.get_placeholder_str); words split on spaces here.
KIMI_K25_PROMPT = (
    "hello <|media_begin|> image <|media_content|> <|media_pad|> <|media_end|> describe"
)

# moonshotai/Kimi-K2.5's preprocessor_config.json media_proc_cfg (the same values as
# transformers' Kimi_K25ImageProcessor defaults, taken from Kimi-K2.6: 16,384 patches of 14 px
# at most, 512 patches a side, merged 2 x 2).
KIMI_K25_MEDIA_PROC_CFG: dict[str, Any] = {
    "in_patch_limit": 16384,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "merge_kernel_size": 2,
    "fixed_output_tokens": None,
    "patch_limit_on_one_side": 512,
    "in_patch_limit_each_frame": 4096,
    "in_patch_limit_video": None,
    "sample_fps": 2.0,
    "max_num_frames_each_video": None,
    "temporal_merge_kernel_size": 4,
    "timestamp_mode": "hh:mm:ss.fff",
    "config_type": "media_proc.processors.moonvit.MoonViTMediaProcessorConfig",
}


def write_kimi_k25_dir(directory: Path, **media_proc_cfg: Any) -> Path:
    """moonshotai/Kimi-K2.5: MoonViT (14 px patches merged 2 x 2) under a DeepSeek-V3 text
    tower (shrunk to two layers); ``media_proc_cfg`` values override the shipped ones."""
    vocab = write_tokenizer(
        directory,
        KIMI_K25_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "eos_token": "[EOS]"},
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["KimiK25ForConditionalGeneration"],
            "model_type": "kimi_k25",
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<|media_pad|>"],
            "media_placeholder_token_id": vocab["<|media_pad|>"],
            "use_unified_vision_chunk": True,
            "video_placeholder": "<|kimi_k25_video_placeholder|>",
            "vision_config": {
                "model_type": "kimi_k25_vision",
                "patch_size": 14,
                "merge_kernel_size": [2, 2],
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
            },
            "text_config": {
                "model_type": "deepseek_v3",
                "hidden_size": 64,
                "intermediate_size": 128,
                "moe_intermediate_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "n_routed_experts": 4,
                "num_experts_per_tok": 2,
                "kv_lora_rank": 16,
                "q_lora_rank": 32,
                "qk_rope_head_dim": 8,
                "qk_nope_head_dim": 16,
                "v_head_dim": 16,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 262144,
                "torch_dtype": "bfloat16",
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {"media_proc_cfg": {**KIMI_K25_MEDIA_PROC_CFG, **media_proc_cfg}},
    )
    return directory


# -- Kimi-VL --------------------------------------------------------------------------------

KIMI_VL_SPECIAL = (
    "[UNK]", "[EOS]", "<|im_user|>", "<|im_middle|>", "<|im_end|>", "<|media_start|>",
    "<|media_content|>", "<|media_end|>", "<|media_pad|>",
)  # fmt: skip
KIMI_VL_PROMPT = (
    "hello <|media_start|> image <|media_content|> <|media_pad|> <|media_end|> describe"
)

# The checkpoint's remote image processor (image_processing_kimi_vl.py), which cannot be
# fetched here, cut to what vLLM reads of it (patch_size, merge_kernel_size, in_token_limit)
# and its resize as public ports of it show: scaled to in_token_limit patches, padded to cells
# (pad_input), refused where a side reaches 512 patches ("Exceed pos emb"). vLLM counts the
# tokens itself from the three values; the stand-in lets its processor be built at all.
_KIMI_VL_IMAGE_PROCESSOR_MODULE = """
import math

import numpy as np
import torch
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature


class KimiVLImageProcessor(BaseImageProcessor):
    model_type = "kimi_vl"
    model_input_names = ["pixel_values", "image_grid_hws"]

    def __init__(self, patch_size=14, pad_input=False, image_mean=(0.5, 0.5, 0.5),
                 image_std=(0.5, 0.5, 0.5), in_token_limit=4096, merge_kernel_size=(2, 2),
                 **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.pad_input = pad_input
        self.image_mean = image_mean
        self.image_std = image_std
        self.in_token_limit = in_token_limit
        self.merge_kernel_size = list(merge_kernel_size)

    def resize_to_cells(self, image):
        w, h = image.size
        patch = self.patch_size
        if (w // patch) * (h // patch) > self.in_token_limit:
            scale = math.sqrt(self.in_token_limit / ((w // patch) * (h // patch)))
            image = image.resize((int(w * scale), int(h * scale)), Image.Resampling.BICUBIC)
        new_w, new_h = image.size
        cell_h, cell_w = self.merge_kernel_size[0] * patch, self.merge_kernel_size[1] * patch
        pad_h, pad_w = (cell_h - new_h % cell_h) % cell_h, (cell_w - new_w % cell_w) % cell_w
        padded = Image.new("RGB", (new_w + pad_w, new_h + pad_h))
        padded.paste(image, (0, 0))
        w, h = padded.size
        if w // patch >= 512 or h // patch >= 512:
            raise ValueError("Exceed pos emb")
        return padded

    def preprocess(self, images, return_tensors=None, **kwargs):
        if not isinstance(images, (list, tuple)):
            images = [images]
        pixel_values, grids = [], []
        patch = self.patch_size
        for image in images:
            array = np.asarray(self.resize_to_cells(image.convert("RGB")), dtype=np.float32)
            array = (array / 255.0 - 0.5) / 0.5
            h, w = array.shape[0] // patch, array.shape[1] // patch
            tensor = torch.from_numpy(array).permute(2, 0, 1)
            patches = tensor.reshape(3, h, patch, w, patch).permute(1, 3, 0, 2, 4)
            pixel_values.append(patches.reshape(-1, 3, patch, patch))
            grids.append([h, w])
        return BatchFeature(
            data={"pixel_values": torch.cat(pixel_values), "image_grid_hws": torch.tensor(grids)},
            tensor_type=return_tensors,
        )
"""

# The checkpoint's remote processor (processing_kimi_vl.py): expands each <|media_pad|> to the
# image's merged cells, as vLLM's prompt update then checks.
_KIMI_VL_PROCESSOR_MODULE = """
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KimiVLProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.image_token = "<|media_pad|>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, images=None, text=None, return_tensors=None, **kwargs):
        image_inputs = {}
        if images is not None:
            image_inputs = self.image_processor.preprocess(images, return_tensors="pt")
        text = [text] if isinstance(text, str) else list(text)
        if image_inputs:
            merge = self.image_processor.merge_kernel_size
            grids = image_inputs["image_grid_hws"]
            counts = [int(grid.prod()) // (merge[0] * merge[1]) for grid in grids]
            expanded = []
            for prompt in text:
                while self.image_token in prompt:
                    prompt = prompt.replace(self.image_token, "<|placeholder|>" * counts.pop(0), 1)
                expanded.append(prompt.replace("<|placeholder|>", self.image_token + " "))
            text = expanded
        text_inputs = self.tokenizer(text)
        return BatchFeature(data={**text_inputs, **image_inputs}, tensor_type=return_tensors)
"""


def write_kimi_vl_dir(directory: Path, **image_processor: Any) -> Path:
    """moonshotai/Kimi-VL-A3B-Instruct: MoonViT (14 px patches merged 2 x 2) under a Moonlight
    (DeepSeek-V3-shaped) text tower, shrunk to two layers; its preprocessor_config.json (4,096
    patches, padded to cells), ``image_processor`` values over it."""
    vocab = write_tokenizer(
        directory,
        KIMI_VL_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "eos_token": "[EOS]"},
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["KimiVLForConditionalGeneration"],
            "model_type": "kimi_vl",
            "torch_dtype": "bfloat16",
            "media_placeholder_token_id": vocab["<|media_pad|>"],
            "vision_config": {
                "model_type": "moonvit",
                "patch_size": 14,
                "merge_kernel_size": [2, 2],
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
            },
            "text_config": {
                "model_type": "deepseek_v3",
                "hidden_size": 64,
                "intermediate_size": 128,
                "moe_intermediate_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "n_routed_experts": 4,
                "num_experts_per_tok": 2,
                "kv_lora_rank": 16,
                "q_lora_rank": None,
                "qk_rope_head_dim": 8,
                "qk_nope_head_dim": 16,
                "v_head_dim": 16,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 131072,
            },
        },
    )
    (directory / "image_processing_kimi_vl.py").write_text(_KIMI_VL_IMAGE_PROCESSOR_MODULE)
    (directory / "processing_kimi_vl.py").write_text(_KIMI_VL_PROCESSOR_MODULE)
    auto_map = {
        "AutoImageProcessor": "image_processing_kimi_vl.KimiVLImageProcessor",
        "AutoProcessor": "processing_kimi_vl.KimiVLProcessor",
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": auto_map,
            "image_processor_type": "KimiVLImageProcessor",
            "processor_class": "KimiVLProcessor",
            "in_token_limit": 4096,
            "patch_size": 14,
            "num_pooled_tokens": 1024,
            "merge_kernel_size": [2, 2],
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "pad_input": True,
            **image_processor,
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {"auto_map": auto_map, "processor_class": "KimiVLProcessor"},
    )
    return directory


# -- LFM2-VL --------------------------------------------------------------------------------

LFM2_VL_SPECIAL = (
    "<|pad|>", "<|startoftext|>", "<|im_end|>", "<image>", "<|image_start|>", "<|image_end|>",
    "<|img_thumbnail|>",
    *(f"<|img_row_{row}_col_{col}|>" for row in range(1, 11) for col in range(1, 11)),
)  # fmt: skip
LFM2_VL_PROMPT = "hello <image> describe"

# LiquidAI/LFM2-VL-1.6B's preprocessor_config.json: transformers' Lfm2VlImageProcessor
# defaults, which were taken from it (16 px patches downsampled 2 x 2, thumbnails of 64 to 256
# tokens, 2 to 10 tiles of 512 px for an image over twice that).
LFM2_VL_IMAGE_PROCESSOR: dict[str, Any] = {
    "image_processor_type": "Lfm2VlImageProcessor",
    "do_image_splitting": True,
    "downsample_factor": 2,
    "encoder_patch_size": 16,
    "max_image_tokens": 256,
    "min_image_tokens": 64,
    "max_num_patches": 1024,
    "max_pixels_tolerance": 2.0,
    "max_tiles": 10,
    "min_tiles": 2,
    "tile_size": 512,
    "use_thumbnail": True,
    "do_pad": True,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
}


def write_lfm2_vl_dir(directory: Path, **image_processor: Any) -> Path:
    """LiquidAI/LFM2-VL-1.6B: a SigLIP2 NaFlex tower of 16 px patches under a two-layer LFM2
    text tower (one short-convolution layer, one attention layer); ``image_processor`` values
    over the shipped ones."""
    vocab = write_tokenizer(
        directory,
        LFM2_VL_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "pad_token": "<|pad|>",
            "bos_token": "<|startoftext|>",
            "eos_token": "<|im_end|>",
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Lfm2VlForConditionalGeneration"],
            "model_type": "lfm2_vl",
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<image>"],
            "downsample_factor": 2,
            "projector_hidden_size": 64,
            "vision_config": {
                "model_type": "siglip2_vision_model",
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_patches": 256,
                "patch_size": 16,
            },
            "text_config": {
                "model_type": "lfm2",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "layer_types": ["conv", "full_attention"],
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 128000,
            },
        },
    )
    write_json(
        directory, "preprocessor_config.json", {**LFM2_VL_IMAGE_PROCESSOR, **image_processor}
    )
    write_json(directory, "processor_config.json", {"processor_class": "Lfm2VlProcessor"})
    return directory
