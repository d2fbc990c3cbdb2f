"""Model directories for the new families, written offline: public config values and a
tokenizer holding the family's special tokens.

Neither the checkpoints nor their tokenizers can be downloaded here, so each directory holds
the checkpoint's public ``config.json`` and processor values (the numbers that reach the
image arithmetic are the shipped ones; the towers are shrunk, since only the processor runs)
and a word-level tokenizer whose vocabulary is the family's special tokens and a few words:
the image placeholders, wrappers and context tokens are single tokens, as in the real ones
(NVLM-D's tile tags are plain text to its tokenizer: its test tokenizer splits them too).
Shared by the renderer tier (vLLM's processor reads them) and the unit tests.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from sidecar.vision import VLLM_MAX_IMAGE_PIXELS

WORDS = ("hello", "describe", "the", "image", "please", "\n")


def write_tokenizer(
    directory: Path,
    special_tokens: Sequence[str],
    config: Mapping[str, Any],
    *,
    added_tokens: Sequence[str] = (),
) -> dict[str, int]:
    """``tokenizer.json`` (special tokens first, then ``WORDS``, then ``added_tokens``) and
    ``tokenizer_config.json``; returns the vocabulary. ``added_tokens`` are plain tokens
    matched anywhere in the text before the whitespace split (a newline, single digits)."""
    directory.mkdir(parents=True, exist_ok=True)
    words = [*WORDS, *(token for token in added_tokens if token not in WORDS)]
    vocab = {token: index for index, token in enumerate([*special_tokens, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=special_tokens[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(list(special_tokens))
    if added_tokens:
        tokenizer.add_tokens([AddedToken(token, normalized=False) for token in added_tokens])
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
    tokenizer: Callable[[Path], dict[str, int]] | None = None,
    **values: Any,
) -> Path:
    """``tokenizer`` writes the checkpoint's tokenizer and returns its vocabulary (default:
    InternVL's special tokens)."""
    vocab = (
        tokenizer(directory)
        if tokenizer is not None
        else write_tokenizer(
            directory,
            INTERNVL_SPECIAL,
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "unk_token": "<unk>",
                "eos_token": "<|endoftext|>",
            },
        )
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


# -- DeepSeek-OCR, DeepSeek-OCR-2, DeepSeek-VL2 ---------------------------------------------

# The checkpoints' tokens, spelled with escapes: fullwidth bars and lower-eighth blocks.
DEEPSEEK_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
DEEPSEEK_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
DEEPSEEK_PAD = "<\uff5c\u2581pad\u2581\uff5c>"  # DeepseekOCRProcessor's pad_token
DEEPSEEK_SPECIAL = ("<unk>", DEEPSEEK_BOS, DEEPSEEK_EOS, DEEPSEEK_PAD, "<image>")
DEEPSEEK_PROMPT = "hello <image> describe"


def _deepseek_language_config(vocab: Mapping[str, int]) -> dict[str, Any]:
    # The checkpoints' DeepseekV2 text tower (MHA, no MLA for the OCR models), shrunk.
    return {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "kv_lora_rank": None,
        "q_lora_rank": None,
        "qk_nope_head_dim": 0,
        "qk_rope_head_dim": 0,
        "v_head_dim": 0,
        "use_mla": False,
        "topk_method": "greedy",
        "bos_token_id": vocab[DEEPSEEK_BOS],
        "eos_token_id": vocab[DEEPSEEK_EOS],
        "max_position_embeddings": 8192,
        "vocab_size": len(vocab),
        "torch_dtype": "bfloat16",
    }


def write_deepseek_ocr_dir(
    directory: Path, *, architecture: str = "DeepseekOCRForCausalLM"
) -> Path:
    """deepseek-ai/DeepSeek-OCR (and -OCR-2 by ``architecture``): a ``deepseek_vl_v2``
    config.json (vLLM's own DeepseekVLV2Config reads it) whose architecture picks vLLM's
    class; the image arithmetic is vLLM's module constants, none of it read from the
    directory. processor_config.json as the checkpoint ships it (DeepseekVLV2Processor's
    values: 16 px patches, downsample 4, <image>, the pad token)."""
    vocab = write_tokenizer(
        directory,
        DEEPSEEK_SPECIAL,
        {
            "tokenizer_class": "LlamaTokenizerFast",
            "unk_token": "<unk>",
            "bos_token": DEEPSEEK_BOS,
            "eos_token": DEEPSEEK_EOS,
            "pad_token": DEEPSEEK_PAD,
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": [architecture],
            "model_type": "deepseek_vl_v2",
            "candidate_resolutions": [[1024, 1024]],
            "global_view_pos": "head",
            "tile_tag": "2D",
            "torch_dtype": "bfloat16",
            "language_config": _deepseek_language_config(vocab),
            "projector_config": {
                "model_type": "mlp_projector",
                "projector_type": "linear",
                "input_dim": 2048,
                "n_embed": 64,
            },
            "vision_config": {"model_type": "vision", "image_size": 1024},
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {
            "processor_class": "DeepseekVLV2Processor",
            "add_special_token": False,
            "candidate_resolutions": [[1024, 1024]],
            "downsample_ratio": 4,
            "ignore_id": -100,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "image_token": "<image>",
            "mask_prompt": False,
            "normalize": True,
            "pad_token": DEEPSEEK_PAD,
            "patch_size": 16,
            "sft_format": "deepseek",
        },
    )
    return directory


def write_deepseek_ocr2_dir(directory: Path) -> Path:
    """deepseek-ai/DeepSeek-OCR-2: the same config layout, its own architecture."""
    return write_deepseek_ocr_dir(directory, architecture="DeepseekOCR2ForCausalLM")


# deepseek-ai/deepseek-vl2-tiny's processor_config.json: every grid of 384 px tiles up to 9.
DEEPSEEK_VL2_RESOLUTIONS = (
    [384, 384], [384, 768], [768, 384], [384, 1152], [1152, 384], [384, 1536], [1536, 384],
    [768, 768], [384, 1920], [1920, 384], [384, 2304], [2304, 384], [768, 1152], [1152, 768],
    [384, 2688], [2688, 384], [384, 3072], [3072, 384], [768, 1536], [1536, 768], [384, 3456],
    [3456, 384], [1152, 1152],
)  # fmt: skip


def write_deepseek_vl2_dir(directory: Path) -> Path:
    """deepseek-ai/deepseek-vl2-tiny: a SigLIP-SO400M tower of 14 px patches at 384 px,
    downsampled 2x (14 cells a tile side); the checkpoint's processor_config.json, read by
    vLLM's own DeepseekVLV2Processor; a shrunk DeepseekV2 text tower without MLA."""
    write_deepseek_ocr_dir(directory, architecture="DeepseekVLV2ForCausalLM")
    config = json.loads((directory / "config.json").read_text())
    config.update(
        candidate_resolutions=list(DEEPSEEK_VL2_RESOLUTIONS),
        vision_config={
            "model_type": "vision",
            "model_name": "siglip_so400m_patch14_384",
            "image_size": 384,
            "patch_size": 14,
            "width": 1152,
            "layers": 27,
            "heads": 16,
            "mlp_ratio": 3.7362,
        },
        projector_config={
            "model_type": "mlp_projector",
            "projector_type": "downsample_mlp_gelu",
            "input_dim": 1152,
            "n_embed": 64,
            "depth": 2,
            "mlp_ratio": 1,
            "downsample_ratio": 2,
        },
    )
    write_json(directory, "config.json", config)
    processor = json.loads((directory / "processor_config.json").read_text())
    processor.update(
        candidate_resolutions=list(DEEPSEEK_VL2_RESOLUTIONS), patch_size=14, downsample_ratio=2
    )
    write_json(directory, "processor_config.json", processor)
    return directory


# -- MiniCPM-V 4.6 / 4.7 --------------------------------------------------------------------

MINICPMV4_6_SPECIAL = (
    "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|image_pad|>", "<|video_pad|>",
    "<image>", "</image>", "<slice>", "</slice>", "<image_id>", "</image_id>",
)  # fmt: skip
MINICPMV4_6_PROMPT = "hello <|image_pad|> describe"
# Qwen's tokenizer spells each digit of the image id, and the newline between slice rows, as
# one token each; the markup tokens are special.
MINICPMV4_6_ADDED = ("\n", *"0123456789")


def write_minicpmv4_6_dir(
    directory: Path,
    *,
    architecture: str = "MiniCPMV4_6ForConditionalGeneration",
    model_type: str = "minicpmv4_6",
    **image_processor: Any,
) -> Path:
    """openbmb/MiniCPM-V-4.6: a SigLIP tower of 14 px patches, images sliced into at most 9
    slices of about 448² px, each merged 16x (two 2 x 2 merges) or 4x. The processor values
    are transformers 5.2's MiniCPMV4_6ImageProcessor class defaults and config.json's are
    MiniCPMV4_6Config's (the checkpoint's own files cannot be read here; the vision tower's
    980 px position grid is MiniCPM-V 2.6's, shrunk otherwise); the tokenizer's markup is
    the names vLLM's MiniCPMV4_6ProcessingInfo falls back to. A small Qwen3.5 text tower."""
    vocab = write_tokenizer(
        directory,
        MINICPMV4_6_SPECIAL,
        {
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": "<unk>",
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "extra_special_tokens": {
                "image_token": "<|image_pad|>",
                "video_token": "<|video_pad|>",
                "image_start_token": "<image>",
                "image_end_token": "</image>",
                "slice_start_token": "<slice>",
                "slice_end_token": "</slice>",
                "image_id_start_token": "<image_id>",
                "image_id_end_token": "</image_id>",
            },
        },
        added_tokens=MINICPMV4_6_ADDED,
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": [architecture],
            "model_type": model_type,
            "torch_dtype": "bfloat16",
            "image_size": 448,
            "insert_layer_id": 6,
            "downsample_mode": "16x",
            "image_token_id": vocab["<|image_pad|>"],
            "video_token_id": vocab["<|video_pad|>"],
            "vision_config": {
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 8,
                "num_attention_heads": 2,
                "image_size": 980,
                "patch_size": 14,
            },
            "text_config": {
                "model_type": "qwen3_5_text",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 4,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 32768,
            },
        },
    )
    processor_values = {
        "max_slice_nums": 9,
        "scale_resolution": 448,
        "patch_size": 14,
        "slice_mode": True,
        "downsample_mode": "16x",
        "use_image_id": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        **image_processor,
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {"image_processor_type": "MiniCPMV4_6ImageProcessor", **processor_values},
    )
    write_json(
        directory,
        "video_preprocessor_config.json",
        {"video_processor_type": "MiniCPMV4_6VideoProcessor", **processor_values},
    )
    return directory


def write_minicpmv4_7_dir(directory: Path, **image_processor: Any) -> Path:
    """openbmb/MiniCPM-V-4.7: MiniCPM-V 4.6's processor and markup (vLLM's 4.7 classes
    subclass 4.6's; transformers maps minicpmv4_7 to MiniCPMV4_6ImageProcessor)."""
    return write_minicpmv4_6_dir(
        directory,
        architecture="MiniCPMV4_7ForConditionalGeneration",
        model_type="minicpmv4_7",
        **image_processor,
    )


# -- NVLM-D ---------------------------------------------------------------------------------

NVLM_SPECIAL = ("<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_pad|>", "<image>")
NVLM_PROMPT = "hello <image>\ndescribe"  # vLLM's NVLM target is "<image>\n"
# The pieces the tile tags split into: NVLM-D's <Image>, </Image>, <tile_k> and
# <tile_global_thumbnail> are plain text to its Qwen2 tokenizer (vLLM's nvlm_d.py: "<Image><tile"
# encodes as several tokens), so here too; what the count takes from the tokenizer is proven.
NVLM_PIECES = ("<", ">", "/", "_", "Image", "tile", "global", "thumbnail", *"0123456789")


def write_nvlm_tokenizer(directory: Path) -> dict[str, int]:
    """A tokenizer that splits punctuation and digits, so each tag costs several tokens
    (``<tile_12>``: 6), and "\\n" is one token, as in Qwen2's."""
    directory.mkdir(parents=True, exist_ok=True)
    tokens = [*NVLM_SPECIAL, *NVLM_PIECES, *WORDS]
    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))  # noqa: S106 - a token
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Punctuation(),
            pre_tokenizers.Digits(individual_digits=True),
        ]
    )
    tokenizer.add_special_tokens(list(NVLM_SPECIAL))
    tokenizer.add_tokens([AddedToken("\n", normalized=False)])
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
        "eos_token": "<|im_end|>",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return vocab


def write_nvlm_d_dir(directory: Path, **values: Any) -> Path:
    """nvidia/NVLM-D-72B: InternViT-6B at 448 px (14 px patches, pixel-shuffled by 0.5 to 256
    tokens), 1-6 tiles + thumbnail (its config.json; the 6 is the NVLM paper's); a two-layer
    Qwen2 tower."""
    return write_internvl_chat_dir(
        directory,
        architecture="NVLM_D",
        model_type="NVLM_D",
        tokenizer=write_nvlm_tokenizer,
        **{"max_dynamic_patch": 6, "template": "chatml", "select_layer": -1, **values},
    )


# -- Llama-Nemotron-Nano-VL -----------------------------------------------------------------

NEMOTRON_VL_PROMPT = INTERNVL_PROMPT

# A stand-in for the checkpoint's remote image processor (its image_processing.py ships with
# the checkpoint and cannot be fetched here): vLLM's count reads only these three attributes.
_NEMOTRON_IMAGE_PROCESSOR_MODULE = """
from transformers.image_processing_utils import BaseImageProcessor


class NemotronNanoVLImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, image_size=512, max_num_tiles=12, use_thumbnail=True, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size
        self.max_num_tiles = max_num_tiles
        self.use_thumbnail = use_thumbnail
"""


def write_nemotron_vl_dir(directory: Path, **processor: Any) -> Path:
    """nvidia/Llama-3.1-Nemotron-Nano-VL-8B-V1: a C-RADIO tower of 16 px patches, 512 px tiles
    pixel-shuffled by 0.5 to 256 tokens, 1-12 tiles + thumbnail (its config.json and
    preprocessor_config.json as published; ``processor`` overrides the latter's values); a
    two-layer stand-in text tower. Its ``<img>``, ``</img>`` and ``<image>`` are single tokens."""
    write_internvl_chat_dir(
        directory,
        architecture="Llama_Nemotron_Nano_VL",
        model_type="Llama_Nemotron_Nano_VL",
        vision_model_type="radio",
        vision={"image_size": 512, "patch_size": 16},
        force_image_size=512,
        template="llama3-chat",
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": {"AutoImageProcessor": "image_processing.NemotronNanoVLImageProcessor"},
            "image_processor_type": "NemotronNanoVLImageProcessor",
            "image_size": 512,
            "max_num_tiles": 12,
            "use_thumbnail": True,
            "norm_mean": [0.48145466, 0.4578275, 0.40821073],
            "norm_std": [0.26862954, 0.26130258, 0.27577711],
            **processor,
        },
    )
    (directory / "image_processing.py").write_text(_NEMOTRON_IMAGE_PROCESSOR_MODULE)
    return directory


# -- Nemotron Nano VL v2, Nemotron-H Omni V3 ------------------------------------------------

NANO_NEMOTRON_SPECIAL = (
    "<unk>", "<|endoftext|>", "<img>", "</img>", "<image>", "<video>", "<so_start>", "<so_end>",
    "<so_embedding>",
)  # fmt: skip
NANO_NEMOTRON_PROMPT = INTERNVL_PROMPT

# The checkpoints' remote config class (configuration.py), cut to what vLLM's processor reads:
# the tiling values at the top level, the RADIO tower's ``args`` (whose ``min_num_patches``
# turns the dynamic resolution on) and a Nemotron-H text tower.
_NANO_NEMOTRON_CONFIG_MODULE = """
from transformers import NemotronHConfig, PretrainedConfig


class RadioConfig(PretrainedConfig):
    model_type = "radio"

    def __init__(self, args=None, patch_size=16, image_size=512, **kwargs):
        super().__init__(**kwargs)
        self.args = args or {}
        self.patch_size = patch_size
        self.image_size = image_size


class NemotronH_Nano_VL_V2_Config(PretrainedConfig):
    model_type = "NemotronH_Nano_VL_V2"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, force_image_size=512,
                 patch_size=16, downsample_ratio=0.5, use_thumbnail=True, norm_mean=None,
                 norm_std=None, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = RadioConfig(**(vision_config or {}))
        self.llm_config = NemotronHConfig(**(llm_config or {}))
        self.force_image_size = force_image_size
        self.patch_size = patch_size
        self.downsample_ratio = downsample_ratio
        self.use_thumbnail = use_thumbnail
        self.norm_mean = norm_mean or [0.48145466, 0.4578275, 0.40821073]
        self.norm_std = norm_std or [0.26862954, 0.26130258, 0.27577711]

    def to_dict(self):
        output = super().to_dict()
        output["vision_config"] = self.vision_config.to_dict()
        output["llm_config"] = self.llm_config.to_dict()
        return output
"""

# The dynamic-resolution RADIO args of the Omni V3 checkpoints are not transcribed here (not
# known offline): these are values of the shape vLLM's tiler takes, to prove its arithmetic.
NANO_NEMOTRON_DYNAMIC_ARGS = {"min_num_patches": 1024, "max_num_patches": 13312}


def write_nano_nemotron_vl_dir(
    directory: Path,
    *,
    architecture: str = "NemotronH_Nano_VL_V2",
    vision_args: Mapping[str, Any] | None = None,
    context_tokens: int = 131072,
    **values: Any,
) -> Path:
    """nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL: C-RADIO at 512 px tiles of 16 px patches,
    pixel-shuffled by 0.5 to 256 tokens, 1-12 tiles + thumbnail (its config.json); a two-layer
    Nemotron-H tower (one Mamba2, one attention block) of ``context_tokens`` positions.
    ``vision_args`` are the RADIO tower's args (``NANO_NEMOTRON_DYNAMIC_ARGS``: the dynamic
    resolution); ``values`` override the top level."""
    vocab = write_tokenizer(
        directory,
        NANO_NEMOTRON_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
         "eos_token": "<|endoftext|>"},
    )  # fmt: skip
    config = {
        "architectures": [architecture],
        "model_type": "NemotronH_Nano_VL_V2",
        "auto_map": {"AutoConfig": "configuration_nano_nemotron.NemotronH_Nano_VL_V2_Config"},
        "torch_dtype": "bfloat16",
        "force_image_size": 512,
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "use_thumbnail": True,
        "vision_config": {"patch_size": 16, "image_size": 512, "args": dict(vision_args or {})},
        "llm_config": {
            "architectures": ["NemotronHForCausalLM"],
            "model_type": "nemotron_h",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "hybrid_override_pattern": "M*",
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "mamba_num_heads": 4,
            "mamba_head_dim": 16,
            "n_groups": 1,
            "ssm_state_size": 16,
            "conv_kernel": 4,
            "vocab_size": len(vocab),
            "max_position_embeddings": context_tokens,
            "torch_dtype": "bfloat16",
        },
        **values,
    }
    write_json(directory, "config.json", config)
    (directory / "configuration_nano_nemotron.py").write_text(_NANO_NEMOTRON_CONFIG_MODULE)
    return directory


# -- H2OVL-Mississippi ----------------------------------------------------------------------


def write_h2ovl_dir(directory: Path, **values: Any) -> Path:
    """h2oai/h2ovl-mississippi-2b: InternViT at 448 px (14 px patches, pixel-shuffled by 0.5 to
    256 tokens), 1-6 tiles + thumbnail, multi-scale adaptive crops on (its config.json); a
    two-layer stand-in text tower."""
    return write_internvl_chat_dir(
        directory,
        architecture="H2OVLChatModel",
        model_type="h2ovl_chat",
        **{"max_dynamic_patch": 6, "use_msac": True, "select_layer": -1, **values},
    )


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


def _expanding_processor_module(
    class_name: str, image_token: str, grid_key: str, merged_cells: str, video_token: str = ""
) -> str:
    """A checkpoint's remote processor that expands each ``image_token`` to the image's merged
    cells (``grid.prod()`` over the ``merged_cells`` expression of the image processor), as
    vLLM's prompt update then checks; the image processor's outputs pass through. The
    ``video_token`` is only named, for a ProcessingInfo that reads it."""
    return f'''
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class {class_name}(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.image_token = "{image_token}"
        self.video_token = "{video_token}"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, images=None, text=None, videos=None, return_tensors=None, **kwargs):
        image_inputs = {{}}
        if images is not None:
            image_inputs = self.image_processor.preprocess(images, return_tensors="pt")
        text = [text] if isinstance(text, str) else list(text)
        if image_inputs:
            merged = {merged_cells}
            counts = [int(grid.prod()) // merged for grid in image_inputs["{grid_key}"]]
            expanded = []
            for prompt in text:
                while self.image_token in prompt:
                    prompt = prompt.replace(self.image_token, "<|placeholder|>" * counts.pop(0), 1)
                expanded.append(prompt.replace("<|placeholder|>", self.image_token + " "))
            text = expanded
        text_inputs = self.tokenizer(text)
        return BatchFeature(data={{**text_inputs, **image_inputs}}, tensor_type=return_tensors)
'''


# The checkpoint's remote processor (processing_kimi_vl.py).
_KIMI_VL_PROCESSOR_MODULE = _expanding_processor_module(
    "KimiVLProcessor",
    "<|media_pad|>",
    "image_grid_hws",
    "self.image_processor.merge_kernel_size[0] * self.image_processor.merge_kernel_size[1]",
)


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


# -- Keye-VL --------------------------------------------------------------------------------

KEYE_SPECIAL = (
    "<unk>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
    "<|video_pad|>",
)  # fmt: skip
# vLLM's KeyeForConditionalGeneration.get_placeholder_str; words split on spaces here.
KEYE_PROMPT = "hello <|vision_start|> <|image_pad|> <|vision_end|> describe"

# The checkpoint's remote configuration (configuration_keye.py): a Qwen3 text tower with the
# vision tower's values under vision_config, cut to what vLLM reads.
_KEYE_CONFIG_MODULE = """
from transformers import PretrainedConfig, Qwen3Config


class KeyeVisionConfig(PretrainedConfig):
    model_type = "Keye"
    base_config_key = "vision_config"

    def __init__(self, patch_size=14, spatial_merge_size=2, hidden_size=32, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.spatial_merge_size = spatial_merge_size
        self.hidden_size = hidden_size


class KeyeConfig(Qwen3Config):
    model_type = "Keye"
    sub_configs = {"vision_config": KeyeVisionConfig}

    def __init__(self, vision_config=None, **kwargs):
        if isinstance(vision_config, dict):
            vision_config = KeyeVisionConfig(**vision_config)
        self.vision_config = vision_config or KeyeVisionConfig()
        super().__init__(**kwargs)
"""

# A stand-in for the checkpoint's remote image processor (image_processing_keye.py, which
# cannot be fetched here), written from its public ports: the smart_resize vLLM copied into
# keye.py, over the processor's own min_pixels/max_pixels (its size dict mirrors them), then
# patches of patch_size and image_grid_thw (1, h, w). vLLM reads size and merge_size of it.
_KEYE_IMAGE_PROCESSOR_MODULE = """
import math

import numpy as np
import torch
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature


def keye_resize(height, width, factor, min_pixels, max_pixels):
    if height < factor:
        width, height = round(width * factor / height), factor
    if width < factor:
        height, width = round(height * factor / width), factor
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


class SiglipImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values", "image_grid_thw"]

    def __init__(self, min_pixels=28 * 28 * 130, max_pixels=28 * 28 * 1280, patch_size=14,
                 temporal_patch_size=1, merge_size=2, **kwargs):
        super().__init__(**kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.patch_size = patch_size
        self.temporal_patch_size = temporal_patch_size
        self.merge_size = merge_size
        self.size = {"min_pixels": min_pixels, "max_pixels": max_pixels}

    def preprocess(self, images, return_tensors=None, **kwargs):
        if not isinstance(images, (list, tuple)):
            images = [images]
        pixel_values, grids = [], []
        patch = self.patch_size
        for image in images:
            width, height = image.size
            h, w = keye_resize(height, width, patch * self.merge_size, self.min_pixels,
                               self.max_pixels)
            resized = image.convert("RGB").resize((w, h), Image.Resampling.BICUBIC)
            array = (np.asarray(resized, dtype=np.float32) / 255.0 - 0.5) / 0.5
            tensor = torch.from_numpy(array).permute(2, 0, 1)
            patches = tensor.reshape(3, h // patch, patch, w // patch, patch)
            pixel_values.append(patches.permute(1, 3, 0, 2, 4).reshape(-1, 3, patch, patch))
            grids.append([1, h // patch, w // patch])
        return BatchFeature(
            data={"pixel_values": torch.cat(pixel_values), "image_grid_thw": torch.tensor(grids)},
            tensor_type=return_tensors,
        )
"""

# The checkpoint's remote processor (processing_keye.py).
_KEYE_PROCESSOR_MODULE = _expanding_processor_module(
    "KeyeProcessor",
    "<|image_pad|>",
    "image_grid_thw",
    "self.image_processor.merge_size ** 2",
    "<|video_pad|>",
)


def write_keye_dir(
    directory: Path, *, architecture: str = "KeyeForConditionalGeneration", **image_processor: Any
) -> Path:
    """Kwai-Keye/Keye-VL-8B-Preview (and Keye-VL-1.5-8B, ``architecture``): a SigLIP tower of
    14 px patches merged 2 x 2 under a Qwen3 text tower, shrunk to two layers; the image
    processor's bounds are its own defaults (the checkpoint's file is not here), with
    ``image_processor`` values over them."""
    vocab = write_tokenizer(
        directory,
        KEYE_SPECIAL,
        {"tokenizer_class": "Qwen2Tokenizer", "unk_token": "<unk>", "eos_token": "<|endoftext|>"},
    )
    model_type = "KeyeVL1_5" if architecture.startswith("KeyeVL1_5") else "Keye"
    write_json(
        directory,
        "config.json",
        {
            "architectures": [architecture],
            "model_type": model_type,
            "auto_map": {"AutoConfig": "configuration_keye.KeyeConfig"},
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<|image_pad|>"],
            "video_token_id": vocab["<|video_pad|>"],
            "vision_config": {"patch_size": 14, "spatial_merge_size": 2, "hidden_size": 32},
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "vocab_size": len(vocab) + 16,
            "max_position_embeddings": 40960,
        },
    )
    config_module = _KEYE_CONFIG_MODULE.replace('"Keye"', repr(model_type).replace("'", '"'))
    (directory / "configuration_keye.py").write_text(config_module)
    (directory / "image_processing_keye.py").write_text(_KEYE_IMAGE_PROCESSOR_MODULE)
    (directory / "processing_keye.py").write_text(_KEYE_PROCESSOR_MODULE)
    auto_map = {
        "AutoImageProcessor": "image_processing_keye.SiglipImageProcessor",
        "AutoProcessor": "processing_keye.KeyeProcessor",
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": auto_map,
            "image_processor_type": "SiglipImageProcessor",
            "processor_class": "KeyeProcessor",
            "patch_size": 14,
            "merge_size": 2,
            "temporal_patch_size": 1,
            **image_processor,
        },
    )
    return directory


# -- Phi-4-multimodal -----------------------------------------------------------------------

PHI4MM_SPECIAL = ("<unk>", "<|endoftext|>", "<|image_1|>", "<|image_2|>", "<|audio_1|>")
PHI4MM_PROMPT = "hello <|image_1|> describe"

# The checkpoint's remote config (configuration_phi4mm.py): Phi-3's, plus the fields vLLM reads.
_PHI4MM_CONFIG_MODULE = """
from transformers import Phi3Config


class Phi4MMConfig(Phi3Config):
    model_type = "phi4mm"

    def __init__(self, img_processor=None, embd_layer=None, audio_processor=None,
                 vision_lora=None, speech_lora=None, **kwargs):
        super().__init__(**kwargs)
        self.img_processor = img_processor
        self.embd_layer = embd_layer or {}
        self.audio_processor = audio_processor
        self.vision_lora = vision_lora
        self.speech_lora = speech_lora
"""

# The checkpoint's remote processor (processing_phi4mm.py), which cannot be fetched here, cut
# to what vLLM reads of it: the image processor's dynamic_hd and find_closest_aspect_ratio
# (InternVL's), the audio feature extractor's sampling_rate, and the image processor's
# dynamic_preprocess as the checkpoint's code has it: the HD grid (vLLM's own
# _find_target_aspect_ratio), the resize into it, and its refusal where a resized side falls
# under 10 px ("the aspect ratio is very extreme"). vLLM counts the tokens itself; the
# stand-in's pixel values are placeholders of the right crop count, not the real crops.
_PHI4MM_PROCESSOR_MODULE = """
import math

import numpy as np
import torch
from transformers import BatchFeature
from transformers.feature_extraction_sequence_utils import SequenceFeatureExtractor
from transformers.image_processing_utils import BaseImageProcessor
from transformers.processing_utils import ProcessorMixin


class Phi4MMImageProcessor(BaseImageProcessor):
    model_input_names = ["input_image_embeds", "image_sizes", "image_attention_mask"]

    def __init__(self, dynamic_hd=36, **kwargs):
        super().__init__(**kwargs)
        self.dynamic_hd = dynamic_hd

    def find_closest_aspect_ratio(self, aspect_ratio, target_ratios, width, height, image_size):
        best_ratio_diff = float("inf")
        best_ratio = (1, 1)
        area = width * height
        for ratio in target_ratios:
            target_aspect_ratio = ratio[0] / ratio[1]
            ratio_diff = abs(aspect_ratio - target_aspect_ratio)
            if ratio_diff < best_ratio_diff:
                best_ratio_diff = ratio_diff
                best_ratio = ratio
            elif ratio_diff == best_ratio_diff:
                if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                    best_ratio = ratio
        return best_ratio

    def dynamic_preprocess(self, image, max_num, image_size=448):
        orig_width, orig_height = image.size
        w_crop_num = math.ceil(orig_width / float(image_size))
        h_crop_num = math.ceil(orig_height / float(image_size))
        if w_crop_num * h_crop_num > max_num:
            ratios = sorted(
                {(i, j) for i in range(1, max_num + 1) for j in range(1, max_num + 1)
                 if 1 <= i * j <= max_num},
                key=lambda x: x[0] * x[1],
            )
            grid = self.find_closest_aspect_ratio(
                orig_width / orig_height, ratios, orig_width, orig_height, image_size
            )
        else:
            grid = (w_crop_num, h_crop_num)
        target_width, target_height = image_size * grid[0], image_size * grid[1]
        ratio_width = target_width / orig_width
        ratio_height = target_height / orig_height
        if ratio_width < ratio_height:
            new_size = (target_width, int(orig_height * ratio_width))
        else:
            new_size = (int(orig_width * ratio_height), target_height)
        if min(new_size[1], target_height) < 10 or min(new_size[0], target_width) < 10:
            raise ValueError(f"the aspect ratio is very extreme {new_size}")
        return grid, (target_height, target_width)

    def preprocess(self, images, dynamic_hd=None, return_tensors=None, **kwargs):
        if not isinstance(images, (list, tuple)):
            images = [images]
        max_num = self.dynamic_hd if dynamic_hd is None else dynamic_hd
        grids, sizes = [], []
        for image in images:
            grid, size = self.dynamic_preprocess(image.convert("RGB"), max_num)
            grids.append(grid)
            sizes.append(list(size))
        crops = max(1 + g[0] * g[1] for g in grids)
        embeds = torch.zeros(len(images), crops, 3, 14, 14)
        mask = torch.ones(len(images), crops, 32, 32, dtype=torch.bool)
        return BatchFeature(
            data={"input_image_embeds": embeds, "image_sizes": torch.tensor(sizes),
                  "image_attention_mask": mask},
            tensor_type=return_tensors,
        )


class Phi4MMAudioFeatureExtractor(SequenceFeatureExtractor):
    model_input_names = ["input_audio_embeds"]

    def __init__(self, **kwargs):
        super().__init__(feature_size=80, sampling_rate=16000, padding_value=0.0, **kwargs)


class Phi4MMProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, tokenizer)
        self.audio_processor = Phi4MMAudioFeatureExtractor()

    def __call__(self, text=None, images=None, audios=None, return_tensors=None, **kwargs):
        image_inputs = {}
        if images:
            image_inputs = self.image_processor.preprocess(images, return_tensors="pt")
        text = [text] if isinstance(text, str) else list(text or [""])
        text_inputs = self.tokenizer(text)
        return BatchFeature(data={**text_inputs, **image_inputs}, tensor_type=return_tensors)
"""


def write_phi4mm_dir(directory: Path, **image_processor: Any) -> Path:
    """microsoft/Phi-4-multimodal-instruct: SigLIP-so400m at 448 px (14 px patches, 2 x 2
    compressed) over HD crops, ``dynamic_hd`` 36 in its preprocessor_config.json, under a Phi-3
    (Phi-4-mini) text tower shrunk to two layers; ``image_processor`` values over it."""
    vocab = write_tokenizer(
        directory,
        PHI4MM_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
         "eos_token": "<|endoftext|>"},
    )  # fmt: skip
    del vocab  # the placeholder id is vLLM's constant (200010), inside vocab_size below
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Phi4MMForCausalLM"],
            "model_type": "phi4mm",
            "auto_map": {"AutoConfig": "configuration_phi4mm.Phi4MMConfig"},
            "torch_dtype": "bfloat16",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": 200064,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "partial_rotary_factor": 0.75,
            "img_processor": None,
            "embd_layer": {
                "embedding_cls": "image",
                "hd_transform_order": "sub_glb",
                "projection_cls": "mlp",
                "use_hd_transform": True,
                "with_learnable_separator": True,
                "audio_embd_layer": {"compression_rate": 8, "downsample_rate": 1},
                "image_embd_layer": {"crop_size": 448, "type": "siglip"},
            },
            "audio_processor": {"config": {"input_size": 80}, "name": "cascades"},
        },
    )
    (directory / "configuration_phi4mm.py").write_text(_PHI4MM_CONFIG_MODULE)
    (directory / "processing_phi4mm.py").write_text(_PHI4MM_PROCESSOR_MODULE)
    auto_map = {
        "AutoProcessor": "processing_phi4mm.Phi4MMProcessor",
        "AutoImageProcessor": "processing_phi4mm.Phi4MMImageProcessor",
        "AutoFeatureExtractor": "processing_phi4mm.Phi4MMAudioFeatureExtractor",
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": auto_map,
            "image_processor_type": "Phi4MMImageProcessor",
            "processor_class": "Phi4MMProcessor",
            "feature_extractor_type": "Phi4MMAudioFeatureExtractor",
            "audio_compression_rate": 8,
            "audio_downsample_rate": 1,
            "audio_feat_stride": 1,
            "dynamic_hd": 36,
            **image_processor,
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {"auto_map": auto_map, "processor_class": "Phi4MMProcessor"},
    )
    return directory


# -- PaliGemma --------------------------------------------------------------------------------

PALIGEMMA_SPECIAL = ("<unk>", "<pad>", "<eos>", "<bos>", "<image>")
PALIGEMMA_PROMPT = "caption describe"  # PaliGemma's task prefix: no <image> in the text


def write_paligemma_dir(directory: Path, *, image_size_px: int = 224, version: int = 1) -> Path:
    """google/paligemma-3b-pt-224 (version 1, Gemma text tower) or paligemma2-3b-pt-224
    (version 2, Gemma 2): SigLIP-So400m/14 at ``image_size_px`` (224, 448 or 896: the -448 /
    -896 checkpoints' vision_config.image_size), one <image> per patch. Their tokenizers
    differ in add_bos_token (PaliGemma 1 true, 2 false), which moves vLLM's insertion; the
    rest is the public config.json and preprocessor_config.json, towers shrunk."""
    vocab = write_tokenizer(
        directory,
        PALIGEMMA_SPECIAL,
        {
            "tokenizer_class": "GemmaTokenizer",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "add_bos_token": version == 1,
            "add_eos_token": False,
            "extra_special_tokens": {"image_token": "<image>"},
        },
    )
    grid = image_size_px // 14
    text = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "num_image_tokens": grid * grid,
        "vocab_size": len(vocab) + 1200,  # PaliGemmaProcessor adds 1,152 <loc>/<seg> tokens
        "max_position_embeddings": 8192,
    }
    if version == 1:
        text["model_type"] = "gemma"
    else:
        text.update(model_type="gemma2", query_pre_attn_scalar=32, sliding_window=4096)
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["PaliGemmaForConditionalGeneration"],
            "model_type": "paligemma",
            "torch_dtype": "bfloat16",
            "bos_token_id": vocab["<bos>"],
            "eos_token_id": vocab["<eos>"],
            "pad_token_id": vocab["<pad>"],
            "image_token_index": vocab["<image>"],
            "hidden_size": 64,
            "projection_dim": 64,
            "text_config": text,
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": image_size_px,
                "patch_size": 14,
                "num_image_tokens": grid * grid,
                "projection_dim": 64,
                "projector_hidden_act": "gelu_fast",
                "vision_use_head": False,
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "SiglipImageProcessor",
            "processor_class": "PaliGemmaProcessor",
            "image_seq_length": grid * grid,
            "size": {"height": image_size_px, "width": image_size_px},
            "do_resize": True,
            "resample": 3,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "do_convert_rgb": None,
        },
    )
    return directory


# -- Granite 4 Vision ---------------------------------------------------------------------------

GRANITE4_VISION_SPECIAL = ("<unk>", "<|end_of_text|>", "<|start_of_role|>", "<image>")
GRANITE4_VISION_PROMPT = "hello <image>\ndescribe"
# Granite Vision's grid of 384 px tiles: every canvas of 1 to 10 tiles in a row or column, and
# the squares and near-squares up to 4 x 4 (the shape of granite-vision-3.x's list, which
# Granite 4 Vision's LLaVA-NeXT processor reads the same way).
GRANITE4_VISION_PINPOINTS = [
    [384 * rows, 384 * columns]
    for rows in range(1, 11)
    for columns in range(1, 11)
    if rows == 1 or columns == 1 or (rows <= 4 and columns <= 4)
]


def write_granite4_vision_dir(
    directory: Path,
    *,
    downsample_rate: str = "4/8",
    select_strategy: str = "full",
    additional_tokens: int = 0,
) -> Path:
    """A Granite 4 Vision directory (``Granite4VisionForConditionalGeneration``): transformers'
    ``Granite4VisionConfig`` with a SigLIP tower of 384 px / 16 px patches and the Window
    Q-Former's ``downsample_rate`` 4/8 (the values vLLM's own comments name: a 24-patch grid
    pooled to 12), and transformers' ``Granite4VisionProcessor`` over a LLaVA-NeXT image
    processor. No checkpoint could be read here: the pinpoints and the text tower are of the
    shape vLLM reads, not transcribed from a release."""
    vocab = write_tokenizer(
        directory,
        GRANITE4_VISION_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "eos_token": "<|end_of_text|>",
            "unk_token": "<unk>",
            "extra_special_tokens": {"image_token": "<image>"},
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Granite4VisionForConditionalGeneration"],
            "model_type": "granite4_vision",
            "torch_dtype": "bfloat16",
            "image_token_index": vocab["<image>"],
            "image_grid_pinpoints": GRANITE4_VISION_PINPOINTS,
            "downsample_rate": downsample_rate,
            "vision_feature_select_strategy": select_strategy,
            "vision_feature_layer": -1,
            "deepstack_layer_map": [[-1, 0]],
            "spatial_target_layers": [0, 1, 0, 1],
            "text_config": {
                "model_type": "granite",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 131072,
            },
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": 384,
                "patch_size": 16,
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "LlavaNextImageProcessor",
            "processor_class": "Granite4VisionProcessor",
            "size": {"shortest_edge": 384},
            "crop_size": {"height": 384, "width": 384},
            "image_grid_pinpoints": GRANITE4_VISION_PINPOINTS,
            "do_resize": True,
            "do_center_crop": True,
            "do_pad": True,
            "resample": 3,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {
            "processor_class": "Granite4VisionProcessor",
            "patch_size": 16,
            "vision_feature_select_strategy": select_strategy,
            "num_additional_image_tokens": additional_tokens,
            "downsample_rate": downsample_rate,
            "image_token": "<image>",
        },
    )
    return directory


# -- Aria ---------------------------------------------------------------------------------------

ARIA_SPECIAL = ("<unk>", "<s>", "</s>", "<|img|>")
ARIA_PROMPT = "hello <|img|> describe"


def write_aria_dir(directory: Path) -> Path:
    """rhymes-ai/Aria: transformers' AriaConfig (projector_patch_to_query_dict 1,225 patches
    to 128 queries, 4,900 to 256: its defaults), an Idefics3 vision tower of 980 px / 14 px,
    and AriaProcessor with max_image_size 980, split_image false and size_conversion
    {490: 128, 980: 256} (the processor's defaults); towers shrunk."""
    vocab = write_tokenizer(
        directory,
        ARIA_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "extra_special_tokens": {"image_token": "<|img|>"},
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["AriaForConditionalGeneration"],
            "model_type": "aria",
            "torch_dtype": "bfloat16",
            "image_token_index": vocab["<|img|>"],
            "projector_patch_to_query_dict": {"1225": 128, "4900": 256},
            "text_config": {
                "model_type": "aria_text",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "moe_num_experts": 4,
                "moe_topk": 2,
                "moe_num_shared_experts": 1,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 65536,
            },
            "vision_config": {
                "model_type": "idefics3_vision",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": 980,
                "patch_size": 14,
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "AriaImageProcessor",
            "processor_class": "AriaProcessor",
            "max_image_size": 980,
            "min_image_size": 336,
            "split_image": False,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {"processor_class": "AriaProcessor", "size_conversion": {"490": 128, "980": 256}},
    )
    return directory


# -- Cosmos 3 Edge and Alpamayo 2 Super (Qwen3-VL-derived) ----------------------------------

QWEN3_SPECIAL = (
    "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
# vLLM's get_placeholder_str for both (Qwen3-VL's); words split on spaces here.
QWEN3_PROMPT = "hello <|vision_start|> <|image_pad|> <|vision_end|> describe"
QWEN3_TOKENIZER_CONFIG = {
    "tokenizer_class": "Qwen2Tokenizer",
    "unk_token": "<unk>",
    "eos_token": "<|endoftext|>",
    "pad_token": "<|endoftext|>",
}


def _qwen3_token_ids(vocab: Mapping[str, int]) -> dict[str, int]:
    return {
        "image_token_id": vocab["<|image_pad|>"],
        "video_token_id": vocab["<|video_pad|>"],
        "vision_start_token_id": vocab["<|vision_start|>"],
        "vision_end_token_id": vocab["<|vision_end|>"],
    }


def write_cosmos3_edge_dir(directory: Path, **image_processor: Any) -> Path:
    """nvidia/Cosmos3-Edge (weights not yet public): transformers' Cosmos3EdgeConfig, a SigLIP2
    tower of 16 px patches merged 2 x 2 (Cosmos3EdgeVisionConfig's defaults) under a
    Nemotron-H-style text tower shrunk to two layers, and Cosmos3EdgeProcessor over
    Cosmos3EdgeImageProcessor at its class defaults (patch 16, merge 2, temporal 1, 65,536 to
    16,777,216 px), with ``image_processor`` values over them."""
    vocab = write_tokenizer(directory, QWEN3_SPECIAL, QWEN3_TOKENIZER_CONFIG)
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Cosmos3EdgeForConditionalGeneration"],
            "model_type": "cosmos3_edge",
            "torch_dtype": "bfloat16",
            **_qwen3_token_ids(vocab),
            "projector_hidden_size": 128,
            "text_config": {
                "model_type": "cosmos3_edge_text",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 131072,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 100_000_000.0,
                    "mrope_section": [8, 4, 4],
                },
            },
            "vision_config": {
                "model_type": "cosmos3_edge_vision",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "patch_size": 16,
                "spatial_merge_size": 2,
            },
        },
    )
    processor = {
        "patch_size": 16,
        "merge_size": 2,
        "temporal_patch_size": 1,
        "size": {"shortest_edge": 65536, "longest_edge": 16777216},
        **image_processor,
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "Cosmos3EdgeImageProcessor",
            "processor_class": "Cosmos3EdgeProcessor",
            **processor,
        },
    )
    write_json(
        directory,
        "video_preprocessor_config.json",
        {
            "video_processor_type": "Cosmos3EdgeVideoProcessor",
            "processor_class": "Cosmos3EdgeProcessor",
            "patch_size": 16,
            "merge_size": 2,
            "temporal_patch_size": 1,
        },
    )
    return directory


ALPAMAYO_DEFAULT_BOUNDS = object()  # config.json without min_pixels / max_pixels


def write_alpamayo2_super_dir(
    directory: Path,
    *,
    min_pixels: Any = ALPAMAYO_DEFAULT_BOUNDS,
    max_pixels: Any = ALPAMAYO_DEFAULT_BOUNDS,
) -> Path:
    """nvidia/Alpamayo2-Super: ``model_type`` alpamayo2_super wrapping a Qwen3-VL model in
    ``vlm_config`` (vision tower of 16 px patches merged 2 x 2; text tower shrunk to two
    layers), the base Qwen3-VL processor files (patch 16, merge 2, 65,536 to 16,777,216 px,
    which vLLM's config class overrides with its own bounds), and no ``traj_ids`` (vLLM's
    tokenizer then checks none). ``min_pixels`` / ``max_pixels``: written to config.json when
    given (None writes null); absent, vLLM's Alpamayo2SuperConfig defaults apply."""
    vocab = write_tokenizer(directory, QWEN3_SPECIAL, QWEN3_TOKENIZER_CONFIG)
    bounds = {
        name: value
        for name, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels))
        if value is not ALPAMAYO_DEFAULT_BOUNDS
    }
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Alpamayo2Super"],
            "model_type": "alpamayo2_super",
            "torch_dtype": "bfloat16",
            **bounds,
            "vlm_config": {
                "model_type": "qwen3_vl",
                **_qwen3_token_ids(vocab),
                "text_config": {
                    "model_type": "qwen3_vl_text",
                    "hidden_size": 64,
                    "intermediate_size": 128,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 2,
                    "num_key_value_heads": 1,
                    "head_dim": 32,
                    "vocab_size": len(vocab) + 4096,
                    "max_position_embeddings": 262144,
                    "rope_scaling": {"rope_type": "default", "mrope_section": [8, 4, 4]},
                },
                "vision_config": {
                    "model_type": "qwen3_vl_vision",
                    "depth": 2,
                    "hidden_size": 64,
                    "intermediate_size": 128,
                    "num_heads": 2,
                    "patch_size": 16,
                    "spatial_merge_size": 2,
                    "temporal_patch_size": 2,
                    "out_hidden_size": 64,
                    "deepstack_visual_indexes": [0],
                },
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "Qwen2VLImageProcessorFast",
            "processor_class": "Qwen3VLProcessor",
            "size": {"shortest_edge": 65536, "longest_edge": 16777216},
            "patch_size": 16,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
        },
    )
    write_json(
        directory,
        "video_preprocessor_config.json",
        {
            "video_processor_type": "Qwen3VLVideoProcessor",
            "processor_class": "Qwen3VLProcessor",
            "patch_size": 16,
            "temporal_patch_size": 2,
            "merge_size": 2,
        },
    )
    return directory


# -- Cohere2Vision (Command A Vision) -----------------------------------------------------------

COHERE2_VISION_SPECIAL = (
    "<UNK>", "<PAD>", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<|START_OF_IMG|>",
    "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>",
)  # fmt: skip
# The chat template writes one <|IMG_PATCH|> per image: the token vLLM's prompt update replaces.
COHERE2_VISION_PROMPT = "hello <|IMG_PATCH|> describe"


def write_cohere2_vision_dir(directory: Path, **image_processor: Any) -> Path:
    """CohereLabs/command-a-vision-07-2025: a SigLIP tower of 512 px tiles and 16 px patches,
    pixel-shuffled 2 x 2 (``downsample_factor``), under a Cohere2 (Command A) text tower shrunk
    to two layers; transformers' Cohere2VisionImageProcessor defaults (512 px tiles, 1 to 12
    of them, ``crop_to_patches``, ``patch_size`` 16: 256 tokens a tile), ``image_processor``
    values over them."""
    vocab = write_tokenizer(
        directory,
        COHERE2_VISION_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<BOS_TOKEN>",
            "eos_token": "<|END_OF_TURN_TOKEN|>",
            "unk_token": "<UNK>",
            "pad_token": "<PAD>",
            "extra_special_tokens": {
                "image_token": "<|IMG_PATCH|>",
                "boi_token": "<|START_OF_IMG|>",
                "eoi_token": "<|END_OF_IMG|>",
                "img_line_break_token": "<|IMG_LINE_BREAK|>",
            },
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Cohere2VisionForConditionalGeneration"],
            "model_type": "cohere2_vision",
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<|IMG_PATCH|>"],
            "downsample_factor": 2,
            "alignment_intermediate_size": 128,
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": 512,
                "patch_size": 16,
            },
            "text_config": {
                "model_type": "cohere2",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 131072,
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "Cohere2VisionImageProcessor",
            "processor_class": "Cohere2VisionProcessor",
            "crop_to_patches": True,
            "min_patches": 1,
            "max_patches": 12,
            "patch_size": 16,
            "size": {"height": 512, "width": 512},
            "do_resize": True,
            "do_rescale": True,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            **image_processor,
        },
    )
    write_json(directory, "processor_config.json", {"processor_class": "Cohere2VisionProcessor"})
    return directory


# -- Molmo 2 --------------------------------------------------------------------------------

MOLMO2_SPECIAL = (
    "<|endoftext|>", "<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<low_res_im_start>",
    "<|image|>", "<im_low>", "<frame_start>", "<frame_end>", "<|video|>",
)  # fmt: skip
MOLMO2_PROMPT = "hello <|image|> describe"
# allenai/Molmo2-4B's preprocessor_config.json, as a public copy of the checkpoint holds it
# (transformers' Molmo2ImageProcessor defaults are the same values): 378 px crops of 14 px
# patches, pooled 2 x 2, at most 8 crops overlapping by 4 patches a side.
MOLMO2_IMAGE_PROCESSOR = {
    "image_processor_type": "Molmo2ImageProcessor",
    "processor_class": "Molmo2Processor",
    "do_convert_rgb": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "max_crops": 8,
    "overlap_margins": [4, 4],
    "patch_size": 14,
    "pooling_size": [2, 2],
    "resample": 2,
    "size": {"height": 378, "width": 378},
}


def write_molmo2_dir(
    directory: Path, *, processor: Mapping[str, Any] | None = None, **image_processor: Any
) -> Path:
    """allenai/Molmo2-4B's config.json (the 8B's differs in its text tower only) with the
    image markup's token ids moved into this tokenizer and the towers shrunk; ``image_processor``
    values over the shipped ones, ``processor`` values (column tokens, start token) in
    processor_config.json."""
    vocab = write_tokenizer(
        directory,
        MOLMO2_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"},
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Molmo2ForConditionalGeneration"],
            "model_type": "molmo2",
            "torch_dtype": "bfloat16",
            "image_start_token_id": vocab["<im_start>"],
            "image_end_token_id": vocab["<im_end>"],
            "image_patch_id": vocab["<im_patch>"],
            "image_high_res_id": vocab["<im_patch>"],
            "image_col_id": vocab["<im_col>"],
            "low_res_image_start_token_id": vocab["<low_res_im_start>"],
            "image_low_res_id": vocab["<im_low>"],
            "frame_start_token_id": vocab["<frame_start>"],
            "frame_end_token_id": vocab["<frame_end>"],
            "use_frame_special_tokens": False,
            "vit_config": {
                "model_type": "molmo2",
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 3,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "head_dim": 16,
                "image_default_input_size": [378, 378],
                "image_num_pos": 729,
                "image_patch_size": 14,
            },
            "adapter_config": {
                "model_type": "molmo2",
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "head_dim": 16,
                "text_hidden_size": 64,
                "vit_layers": [-1, -2],
            },
            "text_config": {
                "model_type": "molmo2_text",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab) + 16,
                "additional_vocab_size": 128,
                "max_position_embeddings": 36864,
                "qk_norm_type": "qwen3",
                "rope_theta": 5000000.0,
            },
        },
    )
    write_json(directory, "preprocessor_config.json", {**MOLMO2_IMAGE_PROCESSOR, **image_processor})
    write_json(
        directory,
        "processor_config.json",
        {"processor_class": "Molmo2Processor", **(processor or {})},
    )
    return directory


# -- Molmo ----------------------------------------------------------------------------------

MOLMO_SPECIAL = ("<|endoftext|>", "<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<|image|>")
MOLMO_PROMPT = "hello describe"  # vLLM inserts each image after the prompt's <|endoftext|>

# The checkpoint's remote config (config_molmo.py), cut to what vLLM reads.
_MOLMO_CONFIG_MODULE = """
from transformers import PretrainedConfig


class MolmoConfig(PretrainedConfig):
    model_type = "molmo"

    def __init__(self, vocab_size=50304, embedding_size=50304, hidden_size=4096,
                 intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=None, max_position_embeddings=2048, initializer_range=0.02,
                 use_cache=True, layer_norm_eps=1e-5, rope_theta=10000.0, clip_qkv=None,
                 qkv_bias=False, weight_tying=False, use_position_ids=True,
                 tie_word_embeddings=True, attention_layer_norm=False, norm_after=False,
                 layer_norm_type="rms", **kwargs):
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        self.rope_theta = rope_theta
        self.clip_qkv = clip_qkv
        self.qkv_bias = qkv_bias
        self.weight_tying = weight_tying
        self.use_position_ids = use_position_ids
        self.attention_layer_norm = attention_layer_norm
        self.norm_after = norm_after
        self.layer_norm_type = layer_norm_type
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
"""

# The checkpoint's remote processor (preprocessing_molmo.py, image_preprocessing_molmo.py),
# which cannot be fetched here, cut to what vLLM reads of it: the image processor's crop
# attributes, process() returning one row of image_input_idx per crop (the low-res view and
# the tiling's crops, chosen as vLLM's select_tiling chooses them), and get_tokens_input's
# leading space. vLLM counts the tokens itself; the pixel values are placeholders of the right
# crop count, not the real crops.
_MOLMO_PROCESSOR_MODULE = """
import numpy as np
import torch
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor
from transformers.processing_utils import ProcessorMixin


def _tiling(height, width, window, max_crops):
    tilings = sorted(
        [(i, j) for i in range(1, max_crops + 1) for j in range(1, max_crops + 1)
         if i * j <= max_crops],
        key=lambda x: x[0] * x[1],
    )
    resolutions = np.array(tilings, dtype=np.int32) * window
    scale = (resolutions.astype(np.float32) / np.array([height, width], dtype=np.float32)).min(
        axis=-1
    )
    if (scale < 1).all():
        return tilings[int(scale.argmax())]
    return tilings[int(np.where(scale < 1.0, 10e9, scale).argmin())]


class MolmoImageProcessor(BaseImageProcessor):
    model_input_names = ["images", "image_input_idx", "image_masks"]

    def __init__(self, max_crops=12, overlap_margins=(4, 4), base_image_input_size=(336, 336),
                 image_token_length_w=12, image_token_length_h=12, image_patch_size=14,
                 image_padding_mask=True, **kwargs):
        super().__init__(**kwargs)
        self.max_crops = max_crops
        self.overlap_margins = list(overlap_margins)
        self.base_image_input_size = list(base_image_input_size)
        self.image_token_length_w = image_token_length_w
        self.image_token_length_h = image_token_length_h
        self.image_patch_size = image_patch_size
        self.image_padding_mask = image_padding_mask

    def crops(self, image):
        width, height = image.size
        margin = sum(self.overlap_margins) * self.image_patch_size
        crop_patches = self.base_image_input_size[0] // self.image_patch_size
        window = (crop_patches - sum(self.overlap_margins)) * self.image_patch_size
        rows, columns = _tiling(height - margin, width - margin, window, self.max_crops)
        return 1 + rows * columns


class MolmoProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, tokenizer)

    def get_tokens_input(self, prompt, message_format, always_start_with_space):
        if always_start_with_space:
            prompt = " " + prompt
        return self.tokenizer.encode(prompt, add_special_tokens=False)

    def process(self, text=None, images=None, tokens=None, **kwargs):
        if tokens is None:
            tokens = self.get_tokens_input(text or "", "none", True)
        bos = self.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        data = {"input_ids": torch.tensor([bos, *tokens])}
        if images:
            images = images if isinstance(images, (list, tuple)) else [images]
            crops = sum(self.image_processor.crops(image) for image in images)
            length = self.image_processor.image_token_length_w * (
                self.image_processor.image_token_length_h
            )
            patch = self.image_processor.image_patch_size
            side = self.image_processor.base_image_input_size[0] // patch
            data["images"] = torch.zeros(crops, side * side, patch * patch * 3)
            data["image_input_idx"] = torch.zeros(crops, length, dtype=torch.long)
            data["image_masks"] = torch.ones(crops, side * side)
        return BatchFeature(data=data)

    def __call__(self, text=None, images=None, **kwargs):
        return self.process(text=text, images=images, **kwargs)
"""


def write_molmo_dir(directory: Path, **image_processor: Any) -> Path:
    """allenai/Molmo-7B-D-0924: a CLIP ViT-L/14 tower at 336 px, 12 x 12 tokens a crop pooled
    2 x 2, at most 12 crops overlapping by 4 patches a side (the remote image processor's
    values, as the checkpoint's users pass them), under a Qwen2 text tower shrunk to two
    layers; ``image_processor`` values over those."""
    vocab = write_tokenizer(
        directory,
        MOLMO_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"},
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["MolmoForCausalLM"],
            "model_type": "molmo",
            "auto_map": {"AutoConfig": "config_molmo.MolmoConfig"},
            "torch_dtype": "float32",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": len(vocab) + 16,
            "embedding_size": len(vocab) + 16,
            "max_position_embeddings": 4096,
            "layer_norm_eps": 1e-6,
            "qkv_bias": True,
            "rope_theta": 1000000.0,
        },
    )
    (directory / "config_molmo.py").write_text(_MOLMO_CONFIG_MODULE)
    (directory / "preprocessing_molmo.py").write_text(_MOLMO_PROCESSOR_MODULE)
    auto_map = {
        "AutoProcessor": "preprocessing_molmo.MolmoProcessor",
        "AutoImageProcessor": "preprocessing_molmo.MolmoImageProcessor",
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": auto_map,
            "image_processor_type": "MolmoImageProcessor",
            "processor_class": "MolmoProcessor",
            "max_crops": 12,
            "overlap_margins": [4, 4],
            "base_image_input_size": [336, 336],
            "image_token_length_w": 12,
            "image_token_length_h": 12,
            "image_patch_size": 14,
            "image_padding_mask": True,
            **image_processor,
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {"auto_map": auto_map, "processor_class": "MolmoProcessor"},
    )
    return directory


# -- BLIP-2, OpenVLA (a fixed count each) and Qianfan-OCR (InternVL chat's tiles) ------------

BLIP2_SPECIAL = ("<unk>", "</s>", "<pad>", "<image>")
BLIP2_PROMPT = "Question: describe Answer:"  # vLLM inserts the queries at the prompt's start


def write_blip2_dir(directory: Path, *, num_query_tokens: int = 32) -> Path:
    """Salesforce/blip2-opt-2.7b: transformers' Blip2Config (an EVA ViT-g of 224 px / 14 px,
    a Q-Former of ``num_query_tokens`` queries, an OPT text tower), BlipImageProcessor at
    224 x 224 and Blip2Processor with the same num_query_tokens (its processor_config.json:
    it expands <image> itself); towers shrunk."""
    vocab = write_tokenizer(
        directory,
        BLIP2_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "</s>",
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "extra_special_tokens": {"image_token": "<image>"},
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Blip2ForConditionalGeneration"],
            "model_type": "blip-2",
            "torch_dtype": "float32",
            "num_query_tokens": num_query_tokens,
            "image_token_index": vocab["<image>"],
            "vision_config": {
                "model_type": "blip_2_vision_model",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": 224,
                "patch_size": 14,
            },
            "qformer_config": {
                "model_type": "blip_2_qformer",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "encoder_hidden_size": 64,
            },
            "text_config": {
                "model_type": "opt",
                "hidden_size": 64,
                "ffn_dim": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "word_embed_proj_dim": 64,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 2048,
                "bos_token_id": vocab["</s>"],
                "eos_token_id": vocab["</s>"],
                "pad_token_id": vocab["<pad>"],
            },
        },
    )
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "image_processor_type": "BlipImageProcessor",
            "processor_class": "Blip2Processor",
            "size": {"height": 224, "width": 224},
            "do_resize": True,
            "resample": 3,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "do_convert_rgb": True,
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {"processor_class": "Blip2Processor", "num_query_tokens": num_query_tokens},
    )
    return directory


OPENVLA_SPECIAL = ("<unk>", "<s>", "</s>", "<PAD>")
# vLLM inserts the image after the prompt's <s>; the checkpoint's Llama tokenizer adds it, this
# word-level one does not, so the prompt spells it.
OPENVLA_PROMPT = "<s> hello describe"


def write_openvla_dir(directory: Path) -> Path:
    """openvla/openvla-7b: vLLM's OpenVLAConfig (image_sizes [224, 224], the fused DINOv2 +
    SigLIP backbone, image_token_index the Llama tokenizer's <PAD> at 32,000), vLLM's own
    OpenVLAProcessor (no processor files read); a two-layer Llama text tower."""
    vocab = write_tokenizer(
        directory,
        OPENVLA_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "pad_token": "<PAD>",
            "unk_token": "<unk>",
        },
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["OpenVLAForActionPrediction"],
            "model_type": "openvla",
            "torch_dtype": "bfloat16",
            "image_sizes": [224, 224],
            "use_fused_vision_backbone": True,
            "image_token_index": vocab["<PAD>"],
            "n_action_bins": 256,
            "text_config": {
                "model_type": "llama",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 4096,
            },
        },
    )
    return directory


QIANFAN_OCR_PROMPT = INTERNVL_PROMPT


def write_qianfan_ocr_dir(directory: Path, **values: Any) -> Path:
    """A Qianfan-OCR checkpoint: transformers' QianfanOCRConfig (its vision_config's
    image_size / patch_size as [448, 448] / [14, 14] pairs, downsample_ratio 0.5, a Qwen3 text
    tower) with InternVL3's tiling values at the top level (1-12 tiles + thumbnail), which
    vLLM's QianfanOCRProcessingInfo reads; not transcribed from a checkpoint (the rule reads
    whatever config.json says). ``values`` override the top-level keys."""
    vocab = write_tokenizer(
        directory,
        INTERNVL_SPECIAL,
        {"tokenizer_class": "Qwen2Tokenizer", "unk_token": "<unk>", "eos_token": "<|endoftext|>"},
    )
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["QianfanOCRForConditionalGeneration"],
            "model_type": "qianfan_ocr",
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<IMG_CONTEXT>"],
            "downsample_ratio": 0.5,
            "min_dynamic_patch": 1,
            "max_dynamic_patch": 12,
            "dynamic_image_size": True,
            "use_thumbnail": True,
            "vision_config": {
                "model_type": "qianfan_ocr_vision",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": [448, 448],
                "patch_size": [14, 14],
            },
            "text_config": {
                "model_type": "qwen3",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "vocab_size": len(vocab) + 16,
                "max_position_embeddings": 32768,
            },
            **values,
        },
    )
    return directory


def write_diffusion_gemma_dir(directory: Path) -> Path:
    """A DiffusionGemma checkpoint: Gemma 4's directory under transformers'
    DiffusionGemmaConfig (its text tower diffusion_gemma_text, the same gemma4_vision tower
    and token ids) and Gemma4Processor; not transcribed from a checkpoint."""
    write_gemma4_dir(directory)
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(architectures=["DiffusionGemmaForBlockDiffusion"], model_type="diffusion_gemma")
    config.pop("audio_config")
    config.pop("video_token_id")
    config["text_config"]["model_type"] = "diffusion_gemma_text"
    path.write_text(json.dumps(config))
    return directory


def write_gemma4_unified_dir(directory: Path, *, num_soft_tokens: int = 280) -> Path:
    """A Gemma 4 Unified checkpoint: Gemma 4's directory under transformers'
    Gemma4UnifiedConfig (an encoder-free gemma4_unified_vision of 16 px patches pooled 3 x 3,
    its budget in vision_config.num_soft_tokens, which vLLM reads) and Gemma4UnifiedProcessor;
    not transcribed from a checkpoint."""
    write_gemma4_dir(directory)
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(
        architectures=["Gemma4UnifiedForConditionalGeneration"], model_type="gemma4_unified"
    )
    config["text_config"]["model_type"] = "gemma4_unified_text"
    config["vision_config"] = {
        "model_type": "gemma4_unified_vision",
        "patch_size": 16,
        "pooling_kernel_size": 3,
        "mm_embed_dim": 64,
        "mm_posemb_size": 1120,
        "output_proj_dims": 64,
        "num_soft_tokens": num_soft_tokens,
    }
    path.write_text(json.dumps(config))
    write_json(
        directory,
        "processor_config.json",
        {
            "processor_class": "Gemma4UnifiedProcessor",
            "image_seq_length": num_soft_tokens,
            "image_processor": {
                "image_processor_type": "Gemma4UnifiedImageProcessor",
                "patch_size": 16,
                "max_soft_tokens": num_soft_tokens,
                "pooling_kernel_size": 3,
            },
            "feature_extractor": {"feature_extractor_type": "Gemma4UnifiedAudioFeatureExtractor"},
            "video_processor": {"video_processor_type": "Gemma4UnifiedVideoProcessor"},
        },
    )
    return directory


# -- ERNIE-4.5-VL ---------------------------------------------------------------------------

ERNIE45_VL_SPECIAL = (
    "<unk>", "<|begin_of_sentence|>", "<|end_of_sentence|>", "<|IMAGE_START|>",
    "<|IMAGE_END|>", "<|image@placeholder|>", "<|IMAGE_PLACEHOLDER|>", "<|VIDEO_START|>",
    "<|VIDEO_END|>", "<|video@placeholder|>",
)  # fmt: skip
# vLLM's Ernie4_5_VLMoeForConditionalGeneration.get_placeholder_str (the chat template writes
# the same markup after "Picture N:"); words split on spaces here.
ERNIE45_VL_PROMPT = "hello <|IMAGE_START|><|image@placeholder|><|IMAGE_END|> describe"

# The checkpoint's remote configuration (configuration_ernie4_5_vl.py): the text tower's values
# at the top, the vision tower's under vision_config, cut to what vLLM reads.
_ERNIE45_VL_CONFIG_MODULE = """
from transformers import PretrainedConfig


class DFNRopeVisionTransformerConfig(PretrainedConfig):
    model_type = "DFNRope_vision_transformer"
    base_config_key = "vision_config"

    def __init__(self, patch_size=14, spatial_merge_size=2, embed_dim=32, hidden_size=32,
                 depth=1, num_heads=2, in_channels=3, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.spatial_merge_size = spatial_merge_size
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.depth = depth
        self.num_heads = num_heads
        self.in_channels = in_channels


class Ernie4_5_VLMoEConfig(PretrainedConfig):
    model_type = "ernie4_5_moe_vl"
    sub_configs = {"vision_config": DFNRopeVisionTransformerConfig}

    def __init__(self, vision_config=None, spatial_conv_size=2, temporal_conv_size=2,
                 im_patch_id=None, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=1, head_dim=32, vocab_size=64,
                 max_position_embeddings=131072, **kwargs):
        if isinstance(vision_config, dict):
            vision_config = DFNRopeVisionTransformerConfig(**vision_config)
        self.vision_config = vision_config or DFNRopeVisionTransformerConfig()
        self.spatial_conv_size = spatial_conv_size
        self.temporal_conv_size = temporal_conv_size
        self.im_patch_id = im_patch_id
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        super().__init__(**kwargs)
"""

# A stand-in for the checkpoint's remote processor (processing_ernie4_5_vl.py, which cannot be
# fetched here), written from its public source and ports (PaddlePaddle/ERNIE's
# AdaptiveImageProcessor and DataProcessor, PaddleFormers' Ernie4_5_VLProcessor): the image
# processor's smart_resize (transformers' Qwen2-VL one: over 200:1 refused, a side floored
# under max_pixels kept at one factor) and get_smarted_resize over patch_size x merge_size; its
# size dict under min_pixels / max_pixels, as vLLM reads it with trust_remote_code; the
# processor's _add_image: the grid from get_smarted_resize over its own image_min_pixels /
# image_max_pixels, <|IMAGE_START|> + grid / spatial_conv_size² placeholders + <|IMAGE_END|>,
# and patches of that grid under "images" and "grid_thw" (what vLLM reads of it).
_ERNIE45_VL_PROCESSOR_MODULE = """
import math

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor
from transformers.processing_utils import ProcessorMixin


def smart_resize(height, width, factor=28, min_pixels=56 * 56, max_pixels=6177 * 28 * 28):
    if max(height, width) / min(height, width) > 200:
        raise ValueError(
            f"absolute aspect ratio must be smaller than 200, got "
            f"{max(height, width) / min(height, width)}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


class Ernie4_5_VLImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values", "image_grid_thw"]

    def __init__(self, min_pixels=56 * 56, max_pixels=6177 * 28 * 28, patch_size=14,
                 merge_size=2, temporal_conv_size=2, image_mean=None, image_std=None,
                 rescale_factor=1 / 255, **kwargs):
        super().__init__(**kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.patch_size = patch_size
        self.merge_size = merge_size
        self.temporal_conv_size = temporal_conv_size
        self.image_mean = image_mean or [0.48145466, 0.4578275, 0.40821073]
        self.image_std = image_std or [0.26862954, 0.26130258, 0.27577711]
        self.rescale_factor = rescale_factor
        self.size = {"min_pixels": min_pixels, "max_pixels": max_pixels}

    def get_smarted_resize(self, height, width, min_pixels=None, max_pixels=None):
        resized_height, resized_width = smart_resize(
            height, width, factor=self.patch_size * self.merge_size,
            min_pixels=self.min_pixels if min_pixels is None else min_pixels,
            max_pixels=self.max_pixels if max_pixels is None else max_pixels,
        )
        return (resized_height, resized_width), (
            resized_height // self.patch_size, resized_width // self.patch_size,
        )

    def preprocess(self, images, predetermined_grid_thw=None, return_tensors=None, **kwargs):
        pixel_values, grids = [], []
        patch = self.patch_size
        for index, image in enumerate(images):
            grid_h, grid_w = predetermined_grid_thw[index]
            resized = image.convert("RGB").resize((grid_w * patch, grid_h * patch),
                                                  Image.Resampling.BICUBIC)
            array = np.asarray(resized, dtype=np.float32)
            tensor = torch.from_numpy(array).permute(2, 0, 1)
            patches = tensor.reshape(3, grid_h, patch, grid_w, patch)
            pixel_values.append(patches.permute(1, 3, 0, 2, 4).reshape(-1, 3 * patch * patch))
            grids.append([1, grid_h, grid_w])
        return BatchFeature(
            data={"pixel_values": torch.cat(pixel_values), "image_grid_thw": torch.tensor(grids)},
            tensor_type=return_tensors,
        )


class Ernie4_5_VLProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    valid_kwargs = ["chat_template", "spatial_conv_size", "temporal_conv_size",
                    "image_min_pixels", "image_max_pixels"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    IMG_START = "<|IMAGE_START|>"
    IMG_END = "<|IMAGE_END|>"

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None,
                 spatial_conv_size=2, temporal_conv_size=2, image_min_pixels=4 * 28 * 28,
                 image_max_pixels=6177 * 28 * 28, **kwargs):
        super().__init__(image_processor, tokenizer, chat_template=chat_template)
        self.spatial_conv_size = spatial_conv_size
        self.temporal_conv_size = temporal_conv_size
        self.image_min_pixels = image_min_pixels
        self.image_max_pixels = image_max_pixels
        self.image_patch_id = self.tokenizer.convert_tokens_to_ids("<|IMAGE_PLACEHOLDER|>")

    def __call__(self, text=None, images=None, videos=None, **kwargs):
        images = list(images or [])
        text = text[0] if isinstance(text, list) else text
        input_ids, pixel_values, grids = [], [], []
        marker = self.IMG_START + "<|image@placeholder|>" + self.IMG_END
        for index, segment in enumerate(text.split(marker)):
            if index:
                image = images[index - 1]
                input_ids.append(self.tokenizer.convert_tokens_to_ids(self.IMG_START))
                patches_h, patches_w = self.image_processor.get_smarted_resize(
                    image.height, image.width, min_pixels=self.image_min_pixels,
                    max_pixels=self.image_max_pixels,
                )[1]
                input_ids += [self.image_patch_id] * (
                    patches_h * patches_w // self.spatial_conv_size**2
                )
                processed = self.image_processor.preprocess(
                    [image], predetermined_grid_thw=np.array([[patches_h, patches_w]])
                )
                pixel_values.append(processed["pixel_values"])
                grids.append(processed["image_grid_thw"])
                input_ids.append(self.tokenizer.convert_tokens_to_ids(self.IMG_END))
            input_ids += self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(segment))
        data = {"input_ids": torch.tensor([input_ids])}
        if grids:
            data["images"] = torch.cat(pixel_values)
            data["grid_thw"] = torch.cat(grids)
        return BatchFeature(data=data)
"""


def write_ernie45_vl_dir(
    directory: Path, *, processor: Mapping[str, Any] | None = None, **image_processor: Any
) -> Path:
    """baidu/ERNIE-4.5-VL-28B-A3B-PT (and -424B-A47B-PT, the same processor): a ViT of 14 px
    patches whose resampler merges 2 x 2 (``spatial_conv_size``) and 2 frames, under an ERNIE
    4.5 MoE text tower shrunk to two dense layers. The checkpoint's processor files are not
    here: the remote processor's own defaults stand, ``image_processor`` values go into
    preprocessor_config.json and ``processor`` ones into processor_config.json."""
    vocab = write_tokenizer(
        directory,
        ERNIE45_VL_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
         "bos_token": "<|begin_of_sentence|>", "eos_token": "<|end_of_sentence|>"},
    )  # fmt: skip
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"],
            "model_type": "ernie4_5_moe_vl",
            "auto_map": {"AutoConfig": "configuration_ernie4_5_vl.Ernie4_5_VLMoEConfig"},
            "torch_dtype": "bfloat16",
            "im_patch_id": vocab["<|IMAGE_PLACEHOLDER|>"],
            "spatial_conv_size": 2,
            "temporal_conv_size": 2,
            "vision_config": {"patch_size": 14, "spatial_merge_size": 2, "embed_dim": 32},
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "vocab_size": len(vocab) + 16,
            "max_position_embeddings": 131072,
        },
    )
    (directory / "configuration_ernie4_5_vl.py").write_text(_ERNIE45_VL_CONFIG_MODULE)
    (directory / "processing_ernie4_5_vl.py").write_text(_ERNIE45_VL_PROCESSOR_MODULE)
    auto_map = {
        "AutoImageProcessor": "processing_ernie4_5_vl.Ernie4_5_VLImageProcessor",
        "AutoProcessor": "processing_ernie4_5_vl.Ernie4_5_VLProcessor",
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": auto_map,
            "image_processor_type": "Ernie4_5_VLImageProcessor",
            "processor_class": "Ernie4_5_VLProcessor",
            "patch_size": 14,
            "merge_size": 2,
            "temporal_conv_size": 2,
            **image_processor,
        },
    )
    if processor:
        write_json(
            directory,
            "processor_config.json",
            {"auto_map": auto_map, "processor_class": "Ernie4_5_VLProcessor", **processor},
        )
    return directory


# -- Phi-3-Vision / Phi-3.5-Vision ----------------------------------------------------------

PHI3V_SPECIAL = ("<unk>", "<s>", "</s>", "<|endoftext|>", "<|image_1|>", "<|image_2|>")
PHI3V_PROMPT = "hello <|image_1|> describe"

# The checkpoints' remote config (configuration_phi3_v.py): Phi-3's, plus the fields vLLM reads.
_PHI3V_CONFIG_MODULE = """
from transformers import Phi3Config


class Phi3VConfig(Phi3Config):
    model_type = "phi3_v"

    def __init__(self, embd_layer=None, img_processor=None, **kwargs):
        super().__init__(**kwargs)
        self.embd_layer = embd_layer or {}
        self.img_processor = img_processor or {}
"""

# The checkpoints' remote processor (processing_phi3_v.py, with its image processor inline, as
# Phi-3.5-vision-instruct ships it), written from its public source and cut to what vLLM
# reads and runs: the image processor's num_crops (1 by default, the checkpoint's
# preprocessor_config.json sets it), calc_num_image_tokens_from_image_size (vLLM's count), the
# processor's img_tokens, and the HD transform the processor runs on each image: the longer
# side scaled to 336 px x the largest scale whose crops fit num_crops, the shorter by the
# aspect ratio (truncated), padded to 336 px multiples; torchvision's resize refuses a side
# of 0 px. The pixel values are placeholders of the right crop count, not the real crops.
_PHI3V_PROCESSOR_MODULE = """
import re

import numpy as np
import torch
import torchvision
import transformers
from PIL import Image
from transformers import AutoImageProcessor, BatchFeature
from transformers.image_processing_utils import BaseImageProcessor
from transformers.processing_utils import ProcessorMixin


def padded_height(height, unit=336):
    return int(np.ceil(height / unit) * unit)


def hd_transform_size(width, height, hd_num=16):
    transposed = width < height
    if transposed:
        width, height = height, width
    ratio = width / height
    scale = 1
    while scale * np.ceil(scale / ratio) <= hd_num:
        scale += 1
    scale -= 1
    new_width = int(scale * 336)
    new_height = int(new_width / ratio)
    return transposed, new_width, new_height


def calc_hd_transform_size(width, height, hd_num=16):
    transposed, new_width, new_height = hd_transform_size(width, height, hd_num)
    size = (new_width, padded_height(new_height))
    return (size[1], size[0]) if transposed else size


def hd_transform(image, hd_num=16):
    transposed, new_width, new_height = hd_transform_size(*image.size, hd_num)
    if transposed:
        image = image.transpose(Image.TRANSPOSE)
    image = torchvision.transforms.functional.resize(image, [new_height, new_width])
    top = int((padded_height(new_height) - new_height) / 2)
    bottom = padded_height(new_height) - new_height - top
    image = torchvision.transforms.functional.pad(image, [0, top, 0, bottom], fill=[255, 255, 255])
    if transposed:
        image = image.transpose(Image.TRANSPOSE)
    return image


class Phi3VImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, num_crops=1, image_mean=None, image_std=None, do_convert_rgb=True,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_crops = num_crops
        self.image_mean = image_mean
        self.image_std = image_std
        self.do_convert_rgb = do_convert_rgb

    def calc_num_image_tokens_from_image_size(self, width, height):
        new_width, new_height = calc_hd_transform_size(width, height, hd_num=self.num_crops)
        return int((new_height // 336 * new_width // 336 + 1) * 144 + 1
                   + (new_height // 336 + 1) * 12)

    def preprocess(self, images, return_tensors=None, **kwargs):
        if not isinstance(images, (list, tuple)):
            images = [images]
        shapes = []
        for image in images:
            width, height = hd_transform(image.convert("RGB"), hd_num=self.num_crops).size
            shapes.append([height, width])
        num_img_tokens = [int(((h // 336) * (w // 336) + 1) * 144 + 1 + (h // 336 + 1) * 12)
                          for h, w in shapes]
        pixel_values = torch.zeros(len(images), self.num_crops + 1, 3, 336, 336)
        return BatchFeature(
            data={"pixel_values": pixel_values, "image_sizes": shapes,
                  "num_img_tokens": num_img_tokens},
            tensor_type=return_tensors,
        )


AutoImageProcessor.register("Phi3VImageProcessor", Phi3VImageProcessor)
transformers.Phi3VImageProcessor = Phi3VImageProcessor


class Phi3VProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "Phi3VImageProcessor"
    tokenizer_class = ("LlamaTokenizer", "LlamaTokenizerFast")
    special_image_token = "<|image|>"

    def __init__(self, image_processor, tokenizer):
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        self.num_img_tokens = image_processor.num_img_tokens
        self.img_tokens = [f"<|image_{i + 1}|>" for i in range(1000000)]

    def __call__(self, text, images=None, padding=False, truncation=None, max_length=None,
                 return_tensors="pt"):
        image_inputs = {} if images is None else self.image_processor(
            images, return_tensors=return_tensors)
        if not len(image_inputs):
            return BatchFeature(data={**self.tokenizer(text, return_tensors=return_tensors)})
        pattern = r"<\\|image_\\d+\\|>"
        chunks = [self.tokenizer(chunk).input_ids for chunk in re.split(pattern, text)]
        tags = [int(tag.split("|")[1].split("_")[-1]) for tag in re.findall(pattern, text)]
        assert sorted(set(tags)) == list(range(1, len(set(tags)) + 1))
        assert len(set(tags)) == len(image_inputs["pixel_values"])
        pads = [[-tag] * image_inputs["num_img_tokens"][tag - 1] for tag in tags]
        if len(chunks) > len(pads):
            pads.append([])
        input_ids = [i for pair in zip(chunks, pads) for part in pair for i in part]
        input_ids = torch.tensor(input_ids, dtype=torch.long).unsqueeze(0)
        return BatchFeature(data={"input_ids": input_ids,
                                  "attention_mask": (input_ids > -1000000).to(torch.long),
                                  "pixel_values": image_inputs["pixel_values"],
                                  "image_sizes": image_inputs["image_sizes"]})

    def calc_num_image_tokens_from_image_size(self, width, height):
        return self.image_processor.calc_num_image_tokens_from_image_size(width, height)

    @property
    def model_input_names(self):
        return list(dict.fromkeys(self.tokenizer.model_input_names
                                  + self.image_processor.model_input_names))
"""


def write_phi3v_dir(directory: Path, *, num_crops: int = 4, **image_processor: Any) -> Path:
    """microsoft/Phi-3.5-vision-instruct (``num_crops`` 4 in its preprocessor_config.json, as
    vLLM's own test of it expects; 16 for Phi-3-vision-128k-instruct, from memory): CLIP
    ViT-L/14 at 336 px over HD crops, 144 tokens a crop, under a Phi-3-mini text tower shrunk
    to two layers; ``image_processor`` values over the processor file's."""
    write_tokenizer(
        directory,
        PHI3V_SPECIAL,
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>",
         "eos_token": "<|endoftext|>"},
    )  # fmt: skip
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["Phi3VForCausalLM"],
            "model_type": "phi3_v",
            "auto_map": {"AutoConfig": "configuration_phi3_v.Phi3VConfig"},
            "torch_dtype": "bfloat16",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "vocab_size": 32064,  # above vLLM's placeholder id, 32044
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "embd_layer": {
                "embedding_cls": "image",
                "hd_transform_order": "sub_glb",
                "projection_cls": "mlp",
                "use_hd_transform": True,
                "with_learnable_separator": True,
            },
            "img_processor": {
                "image_dim_out": 1024,
                "model_name": "openai/clip-vit-large-patch14-336",
                "name": "clip_vision_model",
                "num_img_tokens": 144,
            },
        },
    )
    (directory / "configuration_phi3_v.py").write_text(_PHI3V_CONFIG_MODULE)
    (directory / "processing_phi3_v.py").write_text(_PHI3V_PROCESSOR_MODULE)
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": {"AutoProcessor": "processing_phi3_v.Phi3VProcessor"},
            "do_convert_rgb": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_processor_type": "Phi3VImageProcessor",
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "num_crops": num_crops,
            "num_img_tokens": 144,
            "processor_class": "Phi3VProcessor",
            **image_processor,
        },
    )
    return directory


# -- MiniCPM-V 2.6 / 4.0 / 4.5 (MiniCPMV) ------------------------------------------------------

MINICPMV_SPECIAL = (
    "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "</image>", "<slice>",
    "</slice>", "<image_id>", "</image_id>", "<video>", "</video>",
)  # fmt: skip
MINICPMV_PROMPT = "hello (<image>./</image>) describe"
# The digits of the image id and the newline between slice rows are one token each, as in
# Qwen's tokenizer; "(", "./" and ")" make the template's (<image>./</image>) tokens.
MINICPMV_ADDED = ("\n", *"0123456789", "(", "./", ")")

# The checkpoint's remote config (configuration_minicpm.py), cut to the fields vLLM reads
# (version, query_num, image_size) over a Qwen2 text tower.
_MINICPMV_CONFIG_MODULE = """
from transformers import Qwen2Config


class MiniCPMVConfig(Qwen2Config):
    model_type = "minicpmv"

    def __init__(self, version=2.6, query_num=64, image_size=448, slice_config=None,
                 vision_config=None, use_image_id=True, **kwargs):
        super().__init__(**kwargs)
        self.version = version
        self.query_num = query_num
        self.image_size = image_size
        self.slice_config = slice_config or {}
        self.vision_config = vision_config or {}
        self.use_image_id = use_image_id
"""

# A stand-in for the checkpoint's remote image_processing_minicpmv.py, which cannot be fetched
# here: written from the public MiniCPM-o-2_6 copy of it (the same code vLLM calls for V 2.6,
# 4.0 and 4.5), keeping what reaches the prompt: the attributes set from the file and the
# server's kwargs, get_sliced_grid (columns ascending, the first grid of least error),
# get_slice_image_placeholder (<image_id>N</image_id>, <image> + image_feature_size <unk> +
# </image>, with slice_mode each row of <slice>...</slice> joined by newlines), and the parts
# preprocess makes (the source image, then the slices). Its pixel values are placeholders of
# the right count; tgt_sizes follow the remote find_best_resize / get_refine_size sizes.
_MINICPMV_IMAGE_PROCESSOR_MODULE = """
import math

import torch
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


def _round_to(length, unit):
    return max(round(length / unit) * unit, unit)


class MiniCPMVImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, max_slice_nums=9, scale_resolution=448, patch_size=14, **kwargs):
        self.use_image_id = kwargs.pop("use_image_id", False)
        self.image_feature_size = kwargs.pop("image_feature_size", 64)
        self.im_start_token = kwargs.pop("im_start", "<image>")
        self.im_end_token = kwargs.pop("im_end", "</image>")
        self.slice_start_token = kwargs.pop("slice_start", "<slice>")
        self.slice_end_token = kwargs.pop("slice_end", "</slice>")
        self.unk_token = kwargs.pop("unk", "<unk>")
        self.im_id_start = kwargs.pop("im_id_start", "<image_id>")
        self.im_id_end = kwargs.pop("im_id_end", "</image_id>")
        self.slice_mode = kwargs.pop("slice_mode", True)
        self.mean = kwargs.pop("norm_mean", [0.5, 0.5, 0.5])
        self.std = kwargs.pop("norm_std", [0.5, 0.5, 0.5])
        self.version = kwargs.pop("version", 2.0)
        super().__init__(**kwargs)
        self.max_slice_nums = max_slice_nums
        self.scale_resolution = scale_resolution
        self.patch_size = patch_size

    def get_sliced_grid(self, image_size, max_slice_nums, nerver_split=False):
        width, height = (int(side) for side in image_size)
        log_ratio = math.log(width / height)
        multiple = min(math.ceil(width * height / self.scale_resolution ** 2), max_slice_nums)
        if multiple <= 1 or nerver_split:
            return None
        best, best_error = [1, 1], float("inf")
        for count in (multiple - 1, multiple, multiple + 1):
            if count == 1 or count > max_slice_nums:
                continue
            for columns in range(1, count + 1):
                if count % columns == 0:
                    error = abs(log_ratio - math.log(columns / (count // columns)))
                    if error < best_error:
                        best, best_error = [columns, count // columns], error
        return best

    def find_best_resize(self, size, allow_upscale=False):
        width, height = size
        scale = self.scale_resolution
        if width * height > scale * scale or allow_upscale:
            ratio = width / height
            height = int(scale / math.sqrt(ratio))
            width = int(height * ratio)
        return _round_to(width, self.patch_size), _round_to(height, self.patch_size)

    def get_slice_image_placeholder(self, image_size, image_idx=0, max_slice_nums=None,
                                    use_image_id=None):
        max_slice_nums = self.max_slice_nums if max_slice_nums is None else int(max_slice_nums)
        assert max_slice_nums > 0
        grid = self.get_sliced_grid(image_size, max_slice_nums)
        text = self.im_start_token + self.unk_token * self.image_feature_size + self.im_end_token
        use_image_id = self.use_image_id if use_image_id is None else bool(use_image_id)
        if use_image_id:
            text = f"{self.im_id_start}{image_idx}{self.im_id_end}" + text
        if self.slice_mode and grid is not None:
            part = (
                self.slice_start_token + self.unk_token * self.image_feature_size
                + self.slice_end_token
            )
            text += "\\n".join(part * grid[0] for _ in range(grid[1]))
        return text

    def _part_sizes(self, size, max_slice_nums):
        if not self.slice_mode:
            return [size]
        grid = self.get_sliced_grid(size, max_slice_nums)
        if grid is None:
            return [self.find_best_resize(size, allow_upscale=True)]
        columns, rows = grid
        cell = self.find_best_resize(
            (_round_to(size[0], columns) / columns, _round_to(size[1], rows) / rows),
            allow_upscale=True,
        )
        return [self.find_best_resize(size)] + [cell] * (columns * rows)

    def preprocess(self, images, do_pad=True, max_slice_nums=None, return_tensors=None,
                   **kwargs):
        if not isinstance(images, (list, tuple)):
            images = [[images]]
        elif images and not isinstance(images[0], (list, tuple)):
            images = [images]
        max_slice_nums = self.max_slice_nums if max_slice_nums is None else int(max_slice_nums)
        assert max_slice_nums > 0
        pixel_values, image_sizes, tgt_sizes = [], [], []
        for group in images:
            values, sizes, targets = [], [], []
            for image in group:
                sizes.append(torch.tensor(image.size))
                for width, height in self._part_sizes(image.size, max_slice_nums):
                    values.append(torch.zeros(3, self.patch_size, self.patch_size))
                    targets.append([height // self.patch_size, width // self.patch_size])
            pixel_values.append(values)
            image_sizes.append(sizes)
            tgt_sizes.append(torch.tensor(targets) if targets else [])
        return BatchFeature(
            data={"pixel_values": pixel_values, "image_sizes": image_sizes,
                  "tgt_sizes": tgt_sizes},
        )
"""

# The checkpoint's remote processing_minicpmv.py: vLLM takes only its tokenizer (the image
# processor it builds from the image processor's own auto_map, the processor its own copy).
_MINICPMV_PROCESSOR_MODULE = """
from transformers.processing_utils import ProcessorMixin


class MiniCPMVProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, tokenizer)
"""


# MiniCPM-o 2.6's remote config, tokenizer and processor, cut to what vLLM reads: the
# audio pooling, the tokenizer's markup ids (vLLM's copy of the processor bounds images,
# audio and speakers with them) and the Whisper feature extractor beside the image processor.
MINICPMO_SPECIAL = (
    "<audio>", "</audio>", "<|audio_start|>", "<|audio_end|>", "<|spk_bos|>", "<|spk_eos|>",
)  # fmt: skip
_MINICPMO_CONFIG_MODULE = (
    _MINICPMV_CONFIG_MODULE.replace("MiniCPMVConfig", "MiniCPMOConfig").replace(
        '"minicpmv"', '"minicpmo"'
    )
    + """
        self.audio_pool_step = kwargs.get("audio_pool_step", 2)
        self.audio_chunk_length = kwargs.get("audio_chunk_length", 1.0)
"""
)
_MINICPMO_TOKENIZER_MODULE = """
from transformers import PreTrainedTokenizerFast


class MiniCPMOTokenizerFast(PreTrainedTokenizerFast):
    def _id(self, token):
        return self.convert_tokens_to_ids(token)

    im_start_id = property(lambda self: self._id("<image>"))
    im_end_id = property(lambda self: self._id("</image>"))
    slice_start_id = property(lambda self: self._id("<slice>"))
    slice_end_id = property(lambda self: self._id("</slice>"))
    audio_start_id = property(lambda self: self._id("<|audio_start|>"))
    audio_end_id = property(lambda self: self._id("<|audio_end|>"))
    spk_start_id = property(lambda self: self._id("<|spk_bos|>"))
    spk_end_id = property(lambda self: self._id("<|spk_eos|>"))
"""
_MINICPMO_PROCESSOR_MODULE = """
from transformers.processing_utils import ProcessorMixin


class MiniCPMOProcessor(ProcessorMixin):
    attributes = ["image_processor", "feature_extractor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    feature_extractor_class = "WhisperFeatureExtractor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, feature_extractor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, feature_extractor, tokenizer)
"""


def write_minicpmv_dir(
    directory: Path,
    *,
    version: float = 2.6,
    query_num: int = 64,
    omni: bool = False,
    **image_processor: Any,
) -> Path:
    """openbmb/MiniCPM-V-2_6 (``version`` 4.0: MiniCPM-V-4, 4.5: MiniCPM-V-4_5): a SigLIP
    tower of 14 px patches and a resampler of ``query_num`` (64) queries over a source image
    and up to 9 slices of about 448² px. preprocessor_config.json holds the values the three
    checkpoints ship (max_slice_nums 9, scale_resolution 448, patch_size 14,
    image_feature_size 64, slice_mode and use_image_id true, the <image>/<slice>/<image_id>
    markup), as recalled from their public files, which cannot be read here; config.json's
    version, query_num and image_size are theirs, over a small Qwen2 text tower (4.0's is
    MiniCPM4, 4.5's Qwen3: only the processor runs). The remote code is a stand-in.
    ``omni``: openbmb/MiniCPM-o-2_6 (``MiniCPMO``), the same image processor values."""
    tokenizer_map = (
        {"auto_map": {"AutoTokenizer": [None, "tokenization_minicpmo_fast.MiniCPMOTokenizerFast"]}}
        if omni
        else {}
    )
    vocab = write_tokenizer(
        directory,
        (*MINICPMV_SPECIAL, *(MINICPMO_SPECIAL if omni else ())),
        {
            **tokenizer_map,
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": "<unk>",
            # vLLM's copy of the processor prefixes its own prompt (discarded) with a bos id
            "bos_token": "<|im_start|>",
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
        },
        added_tokens=MINICPMV_ADDED,
    )
    # Decoded back without spaces, so vLLM's (<image>./</image>) round-trips as in the real
    # tokenizer (vLLM adds a second target where it does not).
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.decoder = decoders.Fuse()
    tokenizer.save(str(directory / "tokenizer.json"))
    write_json(
        directory,
        "config.json",
        {
            "architectures": ["MiniCPMO" if omni else "MiniCPMV"],
            "model_type": "minicpmo" if omni else "minicpmv",
            "auto_map": {
                "AutoConfig": "configuration_minicpm."
                + ("MiniCPMOConfig" if omni else "MiniCPMVConfig")
            },
            **({"audio_pool_step": 2, "audio_chunk_length": 1.0} if omni else {}),
            "version": version,
            "query_num": query_num,
            "image_size": 448,
            "slice_config": {"max_slice_nums": 9, "patch_size": 14, "scale_resolution": 448},
            "use_image_id": True,
            "torch_dtype": "bfloat16",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": len(vocab) + 16,
            "max_position_embeddings": 32768,
            "vision_config": {
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": 980,
                "patch_size": 14,
            },
        },
    )
    (directory / "configuration_minicpm.py").write_text(
        _MINICPMO_CONFIG_MODULE if omni else _MINICPMV_CONFIG_MODULE
    )
    (directory / "image_processing_minicpmv.py").write_text(_MINICPMV_IMAGE_PROCESSOR_MODULE)
    processor_class = "MiniCPMOProcessor" if omni else "MiniCPMVProcessor"
    if omni:
        (directory / "processing_minicpmo.py").write_text(_MINICPMO_PROCESSOR_MODULE)
        (directory / "tokenization_minicpmo_fast.py").write_text(_MINICPMO_TOKENIZER_MODULE)
    else:
        (directory / "processing_minicpmv.py").write_text(_MINICPMV_PROCESSOR_MODULE)
    auto_map = {
        "AutoProcessor": f"processing_minicpm{'o' if omni else 'v'}.{processor_class}",
        "AutoImageProcessor": "image_processing_minicpmv.MiniCPMVImageProcessor",
    }
    write_json(
        directory,
        "preprocessor_config.json",
        {
            "auto_map": auto_map,
            "image_processor_type": "MiniCPMVImageProcessor",
            "processor_class": processor_class,
            "max_slice_nums": 9,
            "scale_resolution": 448,
            "patch_size": 14,
            "use_image_id": True,
            "image_feature_size": query_num,
            "im_start": "<image>",
            "im_end": "</image>",
            "slice_start": "<slice>",
            "slice_end": "</slice>",
            "unk": "<unk>",
            "im_id_start": "<image_id>",
            "im_id_end": "</image_id>",
            "slice_mode": True,
            "norm_mean": [0.5, 0.5, 0.5],
            "norm_std": [0.5, 0.5, 0.5],
            "version": version,
            **image_processor,
        },
    )
    write_json(
        directory,
        "processor_config.json",
        {"auto_map": auto_map, "processor_class": processor_class},
    )
    return directory


# -- Step3-VL (and StepVL / Step3p7, which inherit its processing) -------------------------

STEP3_VL_SPECIAL = (
    "<unk>", "<|BOT|>", "<|EOT|>", "<im_patch>", "<im_start>", "<im_end>", "<patch_start>",
    "<patch_end>", "<patch_newline>",
)  # fmt: skip
STEP3_VL_PROMPT = "hello <im_patch> describe"


def write_step3_vl_dir(
    directory: Path,
    *,
    architecture: str = "Step3VLForConditionalGeneration",
    enable_patch: bool | None = None,
) -> Path:
    """stepfun-ai/step3's config.json as vLLM's Step3VLConfig reads it (its defaults are that
    checkpoint's: a 728 px tower of 14 px patches, image_token_id 128001 in the real
    vocabulary), towers shrunk; ``vision_config.enable_patch`` only where given (absent in
    the checkpoint: on). ``architecture`` names StepVL or Step3p7 over the same config class,
    whose processing their classes inherit. vLLM's processor reads no processor file."""
    vocab = write_tokenizer(
        directory,
        STEP3_VL_SPECIAL,
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<|BOT|>",
            "eos_token": "<|EOT|>",
            "unk_token": "<unk>",
        },
    )
    vision: dict[str, Any] = {
        "model_type": "step3_vision_encoder",
        "hidden_size": 32,
        "intermediate_size": 64,
        "output_hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 728,
        "patch_size": 14,
    }
    if enable_patch is not None:
        vision["enable_patch"] = enable_patch
    write_json(
        directory,
        "config.json",
        {
            "architectures": [architecture],
            "model_type": "step3_vl",
            "torch_dtype": "bfloat16",
            "image_token_id": vocab["<im_patch>"],
            "understand_projector_stride": 1,
            "projector_bias": True,
            "vision_config": vision,
            "text_config": {
                "model_type": "step3_text",
                "architectures": ["Step3TextForCausalLM"],
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 2,
                "num_attention_groups": 1,
                "num_hidden_layers": 2,
                "head_dim": 32,
                "share_q_dim": 64,
                "moe_layers_enum": [1],
                "moe_num_experts": 2,
                "moe_top_k": 1,
                "moe_intermediate_size": 64,
                "share_expert_dim": 64,
                "vocab_size": len(vocab) + 16,
                "max_seq_len": 65536,
                "max_position_embedding": 65536,
            },
        },
    )
    return directory
