"""The alias families' model directories (and those of the families with built-in profiles),
built offline, and vLLM 0.33's own processor run on them in-process (``processor_worker.py``
under ``.tools/vllm-render``).

Each ``AliasFamily`` holds a checkpoint's public ``config.json`` and processor values, cut
to what the processors read (the text tower is tiny: no weights are read, only its shape is
validated), and a tokenizer whose vocabulary is the family's special tokens (a WordLevel
``tokenizers`` file): vLLM's prompt updates look only for those. ``write_model`` writes the
directory; ``vllm_outcomes`` runs the worker once for all families, a single process whose
vLLM import is paid once, with a fresh vLLM cache each run (its time:
docs/supported-models.md).

Values, and where they are from:

* Qwen3.5 / Qwen3.6 dense and MoE: ``Qwen3_5ForConditionalGeneration`` /
  ``Qwen3_5MoeForConditionalGeneration``, the Qwen3-VL processor files (patch 16, merge 2,
  65,536 to 16,777,216 px), the vision tower's patch 16 and merge 2 of every size.
* GLM-4.5V / GLM-4.6V (``Glm4vMoeForConditionalGeneration``) and GLM-OCR
  (``GlmOcrForConditionalGeneration``): ``Glm4vImageProcessor`` with 12,544 to 9,633,792 px,
  patch 14, merge 2, temporal 2 (the GLM-4.1V family's values).
* dots.ocr (``DotsOCRForCausalLM``): ``Qwen2VLImageProcessor`` with 3,136 to 11,289,600 px,
  patch 14, merge 2; a flat Qwen2 config with ``vision_config`` (vLLM's ``DotsOCRConfig``).
* Qwen2.5-Omni / Qwen3-Omni: the image path of the thinker, ``thinker_config.vision_config``
  (patch 14 / 16, merge 2) and ``Qwen2VLImageProcessor`` 3,136 to 12,845,056 px.
* LightOnOCR (``LightOnOCRForConditionalGeneration``): Pixtral tower at 1,540 px, patch 14,
  ``spatial_merge_size`` 2.
* The families with built-in profiles (``BUILTIN_FAMILIES``): the built-in's transcribed
  config and preprocessor, with the checkpoint's multimodal token ids and, where the HF
  processor reads them from ``processor_config.json``, its processor values.

Mistral3, Gemma 3, Idefics3 and SmolVLM are counted by the length of the prompt update's replacement
(``count="replacement"``): their ``get_num_image_tokens`` counts the embedding positions only
(Mistral3: no ``[IMG_BREAK]`` / ``[IMG_END]``; Gemma 3: no ``\\n\\n<start_of_image>`` ...
``<end_of_image>\\n\\n``; Idefics3 / SmolVLM: no row / column and
``<fake_token_around_image>`` tokens), while the placeholder a served request gets, and the
sidecar prices, is the whole replacement.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from sidecar.profiles.builtins import BUILTIN_MODELS
from tests.real_vllm.renderer import VLLM_RENDER

WORKER = Path(__file__).with_name("processor_worker.py")
WORKER_TIMEOUT_SECONDS = 900

Size = tuple[int, int]


@dataclass(frozen=True)
class AliasFamily:
    """One alias architecture: its model directory's files and the prompt with one image."""

    name: str
    architecture: str
    config: Mapping[str, Any]  # token ids filled in from ``tokens`` by name: "{<|image_pad|>}"
    preprocessor: Mapping[str, Any]
    tokens: Sequence[str]  # the family's special tokens, the whole vocabulary
    prompt: str  # one image as the chat template writes it
    named_tokens: Mapping[str, str] = field(default_factory=dict)  # tokenizer.image_token, ...
    extra_files: Mapping[str, str] = field(default_factory=dict)
    # False where vLLM's size-only count is not what its processor produces (InternVL-hf:
    # ``get_num_image_tokens`` omits the ``crop_to_patches`` the processor forces); such a
    # family is proven on real images through the full processor only.
    size_only_count_is_served: bool = True
    # How the worker counts a size: "info" (``info.get_num_image_tokens``), "replacement"
    # (the length of the prompt update's replacement, where ``get_num_image_tokens`` counts
    # only part of the placeholder: Mistral3 leaves out the row breaks and the end token), or
    # "none" (Llama 4: vLLM has no count from the size alone; only the decode limit is
    # checked per size, and the family is proven through the full processor).
    count: str = "info"
    # The replacement text holds "\n" and "\n\n" (Gemma 3, Idefics3, SmolVLM, Llama 4): the
    # tokenizer keeps a run of up to 4 as one token, as the families' own tokenizers do
    # (vLLM's Gemma 3 processor looks up "\n" to "\n\n\n\n" in the vocabulary).
    newlines: bool = False


def _text(model_type: str, **extra: Any) -> dict[str, Any]:
    """A tiny text tower: the processors never read it, ModelConfig only validates it."""
    return {
        "model_type": model_type,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "vocab_size": 64,
        "max_position_embeddings": 32768,
        **extra,
    }


QWEN_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
QWEN_IDS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
}
QWEN3_PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "processor_class": "Qwen3VLProcessor",
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}
QWEN_HYBRID_LAYERS = ["linear_attention"] * 3 + ["full_attention"]


def _qwen3_5(name: str, architecture: str, model_type: str) -> AliasFamily:
    return _qwen3_like(
        name,
        architecture,
        model_type,
        _text(f"{model_type}_text", layer_types=QWEN_HYBRID_LAYERS),
        f"{model_type}_vision",
    )


def _qwen3_like(
    name: str,
    architecture: str,
    model_type: str,
    text_config: Mapping[str, Any],
    vision_model_type: str,
    *,
    extra_files: Mapping[str, str] | None = None,
) -> AliasFamily:
    """A Qwen3-VL-shaped checkpoint: Qwen3-VL's processor files and token ids, the vision
    tower's patch 16 and merge 2, under the family's own config types."""
    return AliasFamily(
        name,
        architecture,
        {
            "architectures": [architecture],
            "model_type": model_type,
            **{key: f"{{{token}}}" for key, token in QWEN_IDS.items()},
            "text_config": dict(text_config),
            "vision_config": {
                "model_type": vision_model_type,
                "depth": 2,
                "hidden_size": 64,
                "num_heads": 2,
                "patch_size": 16,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "out_hidden_size": 256,
            },
        },
        QWEN3_PREPROCESSOR,
        QWEN_TOKENS,
        "<|vision_start|><|image_pad|><|vision_end|>",
        extra_files=extra_files or {},
    )


GLM_TOKENS = (
    "<|endoftext|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
)
GLM_IDS = {
    "image_token_id": "<|image|>",
    "video_token_id": "<|video|>",
    "image_start_token_id": "<|begin_of_image|>",
    "image_end_token_id": "<|end_of_image|>",
    "video_start_token_id": "<|begin_of_video|>",
    "video_end_token_id": "<|end_of_video|>",
}
GLM_PREPROCESSOR = {
    "image_processor_type": "Glm4vImageProcessor",
    "processor_class": "Glm4vProcessor",
    "size": {"shortest_edge": 12544, "longest_edge": 9633792},
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


def _glm(name: str, architecture: str, model_type: str) -> AliasFamily:
    return AliasFamily(
        name,
        architecture,
        {
            "architectures": [architecture],
            "model_type": model_type,
            **{key: f"{{{token}}}" for key, token in GLM_IDS.items()},
            "text_config": _text(f"{model_type}_text"),
            "vision_config": {
                "model_type": f"{model_type}_vision",
                "depth": 2,
                "hidden_size": 64,
                "num_heads": 2,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "out_hidden_size": 256,
                "image_size": 336,
            },
        },
        GLM_PREPROCESSOR,
        GLM_TOKENS,
        "<|begin_of_image|><|image|><|end_of_image|>",
    )


DOTS_TOKENS = ("<|endoftext|>", "<|img|>", "<|imgpad|>", "<|endofimg|>", "<|video_pad|>")
OMNI_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_bos|>",
    "<|vision_eos|>",
    "<|IMAGE|>",
    "<|VIDEO|>",
    "<|audio_bos|>",
    "<|audio_eos|>",
    "<|AUDIO|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_pad|>",
)
QWEN2_PREPROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


EXAONE_TOKENS = ("[|endofturn|]", "<vision>", "</vision>", "<|image_pad|>", "<|video_pad|>")
# EXAONE 4.5 (LGAI-EXAONE/EXAONE-4.5-33B): transformers' Exaone4_5_Config (a vision tower of
# patch 14, merge 2, temporal 2; an EXAONE 4 text tower) and Qwen2VLImageProcessor, which
# transformers' auto mapping gives the model type; the pixel bounds are Qwen2.5-VL's, not
# transcribed from the checkpoint (the rule reads whatever the checkpoint's file says).
EXAONE4_5 = AliasFamily(
    "exaone4.5",
    "Exaone4_5_ForConditionalGeneration",
    {
        "architectures": ["Exaone4_5_ForConditionalGeneration"],
        "model_type": "exaone4_5",
        "image_token_id": "{<|image_pad|>}",
        "video_token_id": "{<|video_pad|>}",
        "text_config": _text("exaone4"),
        "vision_config": {
            "model_type": "exaone4_5_vision",
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 2,
            "num_key_value_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 256,
            "fullatt_block_indexes": [1],
        },
    },
    {**QWEN2_PREPROCESSOR, "processor_class": "Exaone4_5_Processor"},
    EXAONE_TOKENS,
    "<vision><|image_pad|></vision>",
)


def _omni(name: str, architecture: str, model_type: str, patch_px: int) -> AliasFamily:
    image, start, end = (
        ("<|IMAGE|>", "<|vision_bos|>", "<|vision_eos|>")
        if model_type == "qwen2_5_omni"
        else ("<|image_pad|>", "<|vision_start|>", "<|vision_end|>")
    )
    thinker = {
        "model_type": f"{model_type}_thinker",
        "image_token_index": f"{{{image}}}",
        "video_token_index": "{<|VIDEO|>}" if model_type == "qwen2_5_omni" else "{<|video_pad|>}",
        "audio_token_index": "{<|AUDIO|>}" if model_type == "qwen2_5_omni" else "{<|audio_pad|>}",
        "vision_start_token_id": f"{{{start}}}",
        "vision_end_token_id": f"{{{end}}}",
        "text_config": _text(f"{model_type}_text"),
        "vision_config": {
            "model_type": f"{model_type}_vision_encoder",
            "depth": 2,
            "hidden_size": 64,
            "num_heads": 2,
            "patch_size": patch_px,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 256,
        },
    }
    return AliasFamily(
        name,
        architecture,
        {
            "architectures": [architecture],
            "model_type": model_type,
            "enable_audio_output": False,
            "thinker_config": thinker,
        },
        {**QWEN2_PREPROCESSOR, "patch_size": patch_px},
        OMNI_TOKENS,
        f"{start}{image}{end}",
        named_tokens={
            "image_token": image,
            "video_token": "<|VIDEO|>" if model_type == "qwen2_5_omni" else "<|video_pad|>",
            "audio_token": "<|AUDIO|>" if model_type == "qwen2_5_omni" else "<|audio_pad|>",
            "vision_bos_token": start,
            "vision_eos_token": end,
            "audio_bos_token": "<|audio_bos|>"
            if model_type == "qwen2_5_omni"
            else "<|audio_start|>",
            "audio_eos_token": "<|audio_eos|>" if model_type == "qwen2_5_omni" else "<|audio_end|>",
        },
    )


def _from_builtin(
    name: str,
    builtin: str,
    architecture: str,
    token_keys: Mapping[str, str],
    tokens: Sequence[str],
    prompt: str,
    processor_class: str,
    *,
    processor_config: Mapping[str, Any] | None = None,
    named_tokens: Mapping[str, str] | None = None,
    size_only_count_is_served: bool = True,
    count: str = "info",
    newlines: bool = False,
) -> AliasFamily:
    """A family the sidecar has a built-in profile for: its transcribed config.json and
    preprocessor values (``sidecar.profiles.builtins``), with the architecture and the
    multimodal token ids a real checkpoint's config.json carries."""
    entry = BUILTIN_MODELS[builtin]
    config = {
        **entry.config,
        "architectures": [architecture],
        **{key: f"{{{token}}}" for key, token in token_keys.items()},
    }
    extra = {"processor_config.json": json.dumps(processor_config)} if processor_config else {}
    return AliasFamily(
        name,
        architecture,
        config,
        {**entry.preprocessor, "processor_class": processor_class},
        tokens,
        prompt,
        named_tokens=named_tokens or {},
        extra_files=extra,
        size_only_count_is_served=size_only_count_is_served,
        count=count,
        newlines=newlines,
    )


QWEN_PROMPT = "<|vision_start|><|image_pad|><|vision_end|>"
IDEFICS_TOKENS = (
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *(f"<row_{row}_col_{column}>" for row in range(1, 7) for column in range(1, 7)),
)
# The families with built-in profiles, through vLLM's processor as well as transformers'.
BUILTIN_FAMILIES: tuple[AliasFamily, ...] = (
    _from_builtin(
        "qwen2-vl",
        "Qwen/Qwen2-VL-7B-Instruct",
        "Qwen2VLForConditionalGeneration",
        QWEN_IDS,
        QWEN_TOKENS,
        QWEN_PROMPT,
        "Qwen2VLProcessor",
    ),
    _from_builtin(
        "qwen2.5-vl",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "Qwen2_5_VLForConditionalGeneration",
        QWEN_IDS,
        QWEN_TOKENS,
        QWEN_PROMPT,
        "Qwen2_5_VLProcessor",
    ),
    _from_builtin(
        "qwen3-vl",
        "Qwen/Qwen3-VL-8B-Instruct",
        "Qwen3VLForConditionalGeneration",
        QWEN_IDS,
        QWEN_TOKENS,
        QWEN_PROMPT,
        "Qwen3VLProcessor",
    ),
    _from_builtin(
        "glm-4.1v",
        "zai-org/GLM-4.1V-9B-Thinking",
        "Glm4vForConditionalGeneration",
        GLM_IDS,
        GLM_TOKENS,
        "<|begin_of_image|><|image|><|end_of_image|>",
        "Glm4vProcessor",
    ),
    _from_builtin(
        "glm-4.6v-flash",
        "zai-org/GLM-4.6V-Flash",
        "Glm4vForConditionalGeneration",
        GLM_IDS,
        GLM_TOKENS,
        "<|begin_of_image|><|image|><|end_of_image|>",
        "Glm4vProcessor",
    ),
    _from_builtin(
        "glm-4.6v",
        "zai-org/GLM-4.6V",
        "Glm4vMoeForConditionalGeneration",
        GLM_IDS,
        GLM_TOKENS,
        "<|begin_of_image|><|image|><|end_of_image|>",
        "Glm4vProcessor",
    ),
    _from_builtin(
        "glm-ocr-builtin",
        "zai-org/GLM-OCR",
        "GlmOcrForConditionalGeneration",
        GLM_IDS,
        GLM_TOKENS,
        "<|begin_of_image|><|image|><|end_of_image|>",
        "Glm4vProcessor",
    ),
    _from_builtin(
        "internvl3-hf",
        "OpenGVLab/InternVL3-8B-hf",
        "InternVLForConditionalGeneration",
        {"image_token_id": "<IMG_CONTEXT>"},
        ("<|endoftext|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"),
        "<IMG_CONTEXT>",
        "InternVLProcessor",
        processor_config={"processor_class": "InternVLProcessor", "image_seq_length": 256},
        named_tokens={
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
        size_only_count_is_served=False,
    ),
    _from_builtin(
        "qwen3-vl-moe",
        "Qwen/Qwen3-VL-30B-A3B-Instruct",
        "Qwen3VLMoeForConditionalGeneration",
        QWEN_IDS,
        QWEN_TOKENS,
        QWEN_PROMPT,
        "Qwen3VLProcessor",
    ),
    _from_builtin(
        "llava-next",
        "llava-hf/llava-v1.6-mistral-7b-hf",
        "LlavaNextForConditionalGeneration",
        {"image_token_index": "<image>"},
        ("</s>", "<image>"),
        "<image>",
        "LlavaNextProcessor",
        processor_config={
            "processor_class": "LlavaNextProcessor",
            "patch_size": 14,
            "vision_feature_select_strategy": "default",
            "num_additional_image_tokens": 1,
            "image_token": "<image>",
        },
    ),
    _from_builtin(
        "llava-onevision",
        "llava-hf/llava-onevision-qwen2-7b-ov-hf",
        "LlavaOnevisionForConditionalGeneration",
        {"image_token_index": "<image>", "video_token_index": "<video>"},
        ("<|im_end|>", "<image>", "<video>"),
        "<image>",
        "LlavaOnevisionProcessor",
        processor_config={
            "processor_class": "LlavaOnevisionProcessor",
            "num_image_tokens": 729,
            "vision_feature_select_strategy": "full",
            "vision_aspect_ratio": "anyres_max_9",
            "image_token": "<image>",
            "video_token": "<video>",
        },
    ),
    _from_builtin(
        "mistral3",
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        "Mistral3ForConditionalGeneration",
        {"image_token_index": "[IMG]"},
        ("</s>", "[IMG]", "[IMG_BREAK]", "[IMG_END]"),
        "[IMG]",
        "PixtralProcessor",
        processor_config={
            "processor_class": "PixtralProcessor",
            "patch_size": 14,
            "spatial_merge_size": 2,
            "image_token": "[IMG]",
            "image_break_token": "[IMG_BREAK]",
            "image_end_token": "[IMG_END]",
        },
        count="replacement",
    ),
    _from_builtin(
        "lightonocr-builtin",
        "lightonai/LightOnOCR-1B-1025",
        "LightOnOCRForConditionalGeneration",
        {"image_token_id": "<|image_pad|>"},
        ("<|endoftext|>", "<|image_pad|>", "<|vision_pad|>", "<|vision_end|>"),
        "<|image_pad|>",
        "PixtralProcessor",
    ),
    _from_builtin(
        "gemma3",
        "google/gemma-3-4b-it",
        "Gemma3ForConditionalGeneration",
        {
            "image_token_index": "<image_soft_token>",
            "boi_token_index": "<start_of_image>",
            "eoi_token_index": "<end_of_image>",
        },
        ("<eos>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"),
        "<start_of_image>",
        "Gemma3Processor",
        processor_config={"processor_class": "Gemma3Processor", "image_seq_length": 256},
        named_tokens={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
        newlines=True,
        count="replacement",
    ),
    _from_builtin(
        "idefics3",
        "HuggingFaceM4/Idefics3-8B-Llama3",
        "Idefics3ForConditionalGeneration",
        {"image_token_id": "<image>"},
        ("<end_of_utterance>", *IDEFICS_TOKENS),
        "<image>",
        "Idefics3Processor",
        processor_config={"processor_class": "Idefics3Processor", "image_seq_len": 169},
        newlines=True,
        count="replacement",
    ),
    _from_builtin(
        "smolvlm2",
        "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
        "SmolVLMForConditionalGeneration",
        {"image_token_id": "<image>"},
        ("<end_of_utterance>", *IDEFICS_TOKENS, "<video>"),
        "<image>",
        "SmolVLMProcessor",
        processor_config={"processor_class": "SmolVLMProcessor", "image_seq_len": 81},
        newlines=True,
        count="replacement",
    ),
    _from_builtin(
        "llama4",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "Llama4ForConditionalGeneration",
        {"image_token_index": "<|image|>"},
        (
            "<|eot|>",
            "<|image|>",
            "<|image_start|>",
            "<|image_end|>",
            "<|patch|>",
            "<|tile_x_separator|>",
            "<|tile_y_separator|>",
        ),
        "<|image|>",
        "Llama4Processor",
        processor_config={"processor_class": "Llama4Processor", "patch_size": 14},
        newlines=True,
        size_only_count_is_served=False,
        count="none",
    ),
    _from_builtin(
        "llava-1.5",
        "llava-hf/llava-1.5-7b-hf",
        "LlavaForConditionalGeneration",
        {"image_token_index": "<image>"},
        ("</s>", "<image>"),
        "<image>",
        "LlavaProcessor",
        processor_config={
            "processor_class": "LlavaProcessor",
            "patch_size": 14,
            "vision_feature_select_strategy": "default",
            "num_additional_image_tokens": 1,
            "image_token": "<image>",
        },
    ),
)

FAMILIES: tuple[AliasFamily, ...] = (
    _qwen3_5("qwen3.5", "Qwen3_5ForConditionalGeneration", "qwen3_5"),
    _qwen3_5("qwen3.5-moe", "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"),
    _glm("glm-4.5v", "Glm4vMoeForConditionalGeneration", "glm4v_moe"),
    _glm("glm-ocr", "GlmOcrForConditionalGeneration", "glm_ocr"),
    AliasFamily(
        "dots.ocr",
        "DotsOCRForCausalLM",
        {
            "architectures": ["DotsOCRForCausalLM"],
            "model_type": "dots_ocr",
            "auto_map": {"AutoConfig": "configuration_dots.DotsOCRConfig"},
            "image_token_id": "{<|imgpad|>}",
            "video_token_id": "{<|video_pad|>}",
            **_text("dots_ocr"),
            "vision_config": {
                "embed_dim": 64,
                "hidden_size": 256,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 1,
            },
        },
        {**QWEN2_PREPROCESSOR, "max_pixels": 11289600, "temporal_patch_size": 1},
        DOTS_TOKENS,
        "<|img|><|imgpad|><|endofimg|>",
        # The checkpoint's config class is remote code; vLLM ships the same class
        # (vllm/transformers_utils/configs/dotsocr.py), which the directory's module re-exports.
        extra_files={
            "configuration_dots.py": "from vllm.transformers_utils.configs.dotsocr import "
            "DotsOCRConfig, DotsVisionConfig  # noqa: F401\n"
        },
    ),
    EXAONE4_5,
    # Cosmos 3: transformers' Cosmos3OmniConfig over a Qwen3-VL vision and text tower,
    # Qwen3-VL's processor (Cosmos3ProcessingInfo changes only the config class).
    _qwen3_like(
        "cosmos3",
        "Cosmos3ForConditionalGeneration",
        "cosmos3_omni",
        _text("qwen3_vl_text"),
        "qwen3_vl_vision",
    ),
    _omni("qwen2.5-omni", "Qwen2_5OmniForConditionalGeneration", "qwen2_5_omni", 14),
    _omni("qwen3-omni", "Qwen3OmniMoeForConditionalGeneration", "qwen3_omni_moe", 16),
    AliasFamily(
        "lightonocr",
        "LightOnOCRForConditionalGeneration",
        {
            "architectures": ["LightOnOCRForConditionalGeneration"],
            "model_type": "mistral3",  # the checkpoint's: vLLM reads it as a Mistral3Config
            "image_token_id": "{<|image_pad|>}",
            "spatial_merge_size": 2,
            "text_config": _text("qwen3"),
            "vision_config": {
                "model_type": "pixtral",
                "image_size": 1540,
                "patch_size": 14,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "head_dim": 32,
            },
        },
        {
            "image_processor_type": "PixtralImageProcessor",
            "processor_class": "PixtralProcessor",
            "patch_size": 14,
            "size": {"longest_edge": 1540},
        },
        ("<|endoftext|>", "<|image_pad|>", "<|vision_pad|>", "<|vision_end|>"),
        "<|image_pad|>",
    ),
    *BUILTIN_FAMILIES,
)


def _resolved(value: Any, ids: Mapping[str, int]) -> Any:
    """``value`` with every ``"{token}"`` string replaced by that token's id."""
    if isinstance(value, dict):
        return {key: _resolved(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item, ids) for item in value]
    if isinstance(value, str) and value[:2] in ("{<", "{[") and value[-2:] in (">}", "]}"):
        return ids[value[1:-1]]
    return value


def token_ids(family: AliasFamily) -> dict[str, int]:
    return {token: index + 1 for index, token in enumerate(family.tokens)}  # 0 is [UNK]


def model_config(family: AliasFamily) -> dict[str, Any]:
    """The family's ``config.json`` with its token ids resolved."""
    resolved: dict[str, Any] = _resolved(dict(family.config), token_ids(family))
    return resolved


def write_model(family: AliasFamily, directory: Path) -> Path:
    """The family's model directory: config, processor values, tokenizer."""
    directory.mkdir(parents=True, exist_ok=True)
    ids = token_ids(family)
    vocab = {"[UNK]": 0, **ids}
    if family.newlines:
        vocab |= {"\n" * n: len(vocab) + n - 1 for n in range(1, 5)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))  # noqa: S106
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Split(Regex(r"\n+|[^\n]+"), behavior="isolated")
        if family.newlines
        else pre_tokenizers.Whitespace()
    )
    tokenizer.add_special_tokens(list(family.tokens))
    tokenizer.save(str(directory / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": family.tokens[0],
        "pad_token": family.tokens[0],
        "model_max_length": 32768,
        "extra_special_tokens": dict(family.named_tokens),
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (directory / "config.json").write_text(json.dumps(model_config(family)))
    (directory / "preprocessor_config.json").write_text(json.dumps(dict(family.preprocessor)))
    for name, content in family.extra_files.items():
        (directory / name).write_text(content)
    return directory


def vllm_outcomes(
    directories: Mapping[str, Path], sizes: Sequence[Size], applied: Mapping[str, Sequence[Size]]
) -> dict[str, Any]:
    """vLLM 0.33's outcome for every size on every family, and its full processor's on
    ``applied[name]``: ``{name: {"info", "counts": [...], "applied": [...]}}`` or ``{"error"}``."""
    families = {family.name: family for family in FAMILIES}
    jobs = [
        {
            "name": name,
            "directory": str(directory),
            "sizes": [list(size) for size in sizes],
            "applied": [list(size) for size in applied[name]],
            "prompt": families[name].prompt,
            "count": families[name].count,
        }
        for name, directory in directories.items()
    ]
    with tempfile.TemporaryDirectory() as scratch:
        job_path, out_path = Path(scratch) / "job.json", Path(scratch) / "out.json"
        job_path.write_text(json.dumps(jobs))
        subprocess.run(  # noqa: S603 - the repository's own worker script
            [str(VLLM_RENDER / "bin" / "python"), str(WORKER), str(job_path), str(out_path)],
            check=True,
            timeout=WORKER_TIMEOUT_SECONDS,
            env={
                "VLLM_TARGET_DEVICE": "cpu",
                "HF_HUB_OFFLINE": "1",  # the directories are complete: nothing is fetched
                "VLLM_CACHE_ROOT": scratch,  # hermetic: no model-info cache carried over
                "HOME": scratch,
                "PATH": "/usr/bin:/bin",
            },
            cwd=scratch,
        )
        results: dict[str, Any] = json.loads(out_path.read_text())
    return results
