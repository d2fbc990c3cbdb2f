"""Every image architecture of vLLM 0.33's registry, and how the sidecar prices each.

vLLM picks a model's implementation by the ``architectures`` list of its ``config.json``
(``vllm/model_executor/models/registry.py``: ``_MULTIMODAL_MODELS``; an architecture it
dropped is in ``_PREVIOUSLY_SUPPORTED_MODELS`` with the last version that served it). The
sidecar dispatches the same way, from this one table: each architecture is

* ``RULE``: priced exactly by one of the sidecar's vision rules (``rule``, a key of
  ``sidecar.profiles.VISION_RULES``). An alias is an architecture whose vLLM
  ``*ProcessingInfo`` inherits a family the sidecar reproduces and changes only where its
  config lives (``config_key``: Qwen2.5-Omni's ``thinker_config``) or its name;
* ``NEEDS_ENGINE``: served by vLLM 0.33, but no rule reproduces its processor yet; it is
  priced by asking the engine (``SIDECAR_PRICING=engine``) until a rule exists;
* ``NOT_SERVED``: vLLM 0.33 refuses it, naming the version that dropped it.

A config without ``architectures`` (the built-in profiles, some old checkpoints) is
dispatched by its ``model_type``. ``tests/unit/profiles/test_architectures.py`` keeps
``docs/supported-models.md`` equal to this table, and the table equal to vLLM 0.33's
``registry.py`` (read where ``.tools/vllm-render`` is installed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sidecar.errors import ConfigurationError


class Support(StrEnum):
    """How the sidecar prices an architecture."""

    RULE = "rule"
    NEEDS_ENGINE = "needs_engine"
    NOT_SERVED = "not_served"


@dataclass(frozen=True, slots=True)
class Architecture:
    """One image architecture of vLLM 0.33's registry (or one it dropped)."""

    name: str  # the ``architectures`` entry of config.json, as vLLM's registry spells it
    support: Support
    vllm_module: str  # vllm/model_executor/models/<module>.py ("" for a dropped one)
    rule: str | None = None  # the VISION_RULES family that prices it (RULE only)
    model_types: tuple[str, ...] = ()  # config.json model_type values it is dispatched by
    config_key: str | None = None  # the sub-config vLLM's get_hf_config returns
    # A sub-config whose towers vLLM's config class lifts to the top level beside the wrapper's
    # own fields (Alpamayo 2 Super's vlm_config): its text_config and vision_config replace the
    # top level's, its token ids fill in where the top level has none.
    lifted_key: str | None = None
    prompt_family: str | None = None  # the exact text counter's prompt format, if any
    video_rule: str | None = None  # the VIDEO_RULES family pricing its videos exactly, if any
    dropped_after: str | None = None  # last vLLM version that served it (NOT_SERVED only)
    note: str = ""  # one line for docs: what vLLM's code does, why this mapping
    proof: str = ""  # what the rule is tested against for this architecture (RULE only)

    def model_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The part of ``config.json`` vLLM's processor reads as the model's config."""
        if self.lifted_key is not None:
            return _lifted(config, self.lifted_key)
        if self.config_key is None:
            return dict(config)
        nested = config.get(self.config_key)
        if not isinstance(nested, dict):
            raise ConfigurationError(
                f"a {self.name} config.json needs a {self.config_key!r} object "
                "(vLLM reads the model's config there)"
            )
        return nested


# The token ids Alpamayo2SuperConfig takes from its vlm_config where the top level has none.
_LIFTED_TOKEN_IDS = (
    "image_token_id",
    "video_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
)


def _lifted(config: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``config`` as vLLM's config class exposes it: ``config[key]``'s towers at the top."""
    nested = config.get(key) or {}
    if not isinstance(nested, dict):
        raise ConfigurationError(f"config.json's {key!r} must be an object")
    lifted = dict(config)
    for tower in ("text_config", "vision_config"):
        if tower in nested:
            lifted[tower] = nested[tower]
    for token in _LIFTED_TOKEN_IDS:
        if token in nested:
            lifted.setdefault(token, nested[token])
    return lifted


def _rule(
    name: str,
    module: str,
    rule: str,
    *model_types: str,
    config_key: str | None = None,
    lifted_key: str | None = None,
    prompt_family: str | None = None,
    video_rule: str | None = None,
    note: str = "",
    proof: str = "",
) -> Architecture:
    return Architecture(
        name,
        Support.RULE,
        module,
        rule=rule,
        model_types=model_types,
        config_key=config_key,
        lifted_key=lifted_key,
        prompt_family=prompt_family,
        video_rule=video_rule,
        note=note,
        proof=proof,
    )


def _engine(name: str, module: str, note: str = "") -> Architecture:
    return Architecture(name, Support.NEEDS_ENGINE, module, note=note)


def _dropped(name: str, version: str, *model_types: str, note: str = "") -> Architecture:
    return Architecture(
        name, Support.NOT_SERVED, "", model_types=model_types, dropped_after=version, note=note
    )


# What a rule is proven against, per architecture (docs/supported-models.md says how).
BY_TRANSFORMERS = "transformers' processor (tests/oracle)"
BY_VLLM = "vLLM 0.33's processor (tests/renderer/test_processor_counts.py)"
BY_NEW_FAMILIES = "vLLM 0.33's processor (tests/renderer/test_new_families.py)"
BY_BOTH = "transformers' processor (tests/oracle) and vLLM 0.33's (tests/renderer)"
BY_SOURCE = "vLLM 0.33's source only: the config class is remote code, not run here"
BY_COUNT_STANDIN = (
    "vLLM 0.33's count (tests/renderer/test_new_families.py); the remote image processor "
    "it reads is a stand-in, not run here"
)
BY_PLACEHOLDER_STANDIN = (
    "vLLM 0.33's prompt update (tests/renderer/test_new_families.py) over a stand-in for the "
    "remote image processor that writes the placeholder, from its public source, not run here"
)

_INHERITS = "its ProcessingInfo inherits {}, with changes not yet proven"
# vLLM's count is the Qwen one, but the image processor whose size and image_grid_thw it
# reads is the checkpoint's remote code (AutoProcessor, trust_remote_code), absent here.
_REMOTE_PROCESSOR = (
    "{}'s ProcessingInfo over the checkpoint's remote processor (AutoProcessor): its image "
    "processor's bounds and grid are remote code, not run here"
)

_TABLE: tuple[Architecture, ...] = (
    # --- Qwen-VL smart resize (Qwen2VLProcessingInfo and its heirs) ----------------------------
    _rule(
        "Qwen2VLForConditionalGeneration",
        "qwen2_vl",
        "qwen2_vl",
        "qwen2_vl",
        prompt_family="qwen2_vl",
        video_rule="qwen2_vl",
        proof=BY_BOTH,
    ),
    _rule(
        "Qwen2_5_VLForConditionalGeneration",
        "qwen2_5_vl",
        "qwen2_5_vl",
        "qwen2_5_vl",
        prompt_family="qwen2_5_vl",
        video_rule="qwen2_5_vl",
        proof=BY_BOTH,
    ),
    _rule(
        "Qwen3VLForConditionalGeneration",
        "qwen3_vl",
        "qwen3_vl",
        "qwen3_vl",
        prompt_family="qwen3_vl",
        video_rule="qwen3_vl",
        proof=BY_BOTH,
    ),
    _rule(
        "Qwen3VLMoeForConditionalGeneration",
        "qwen3_vl_moe",
        "qwen3_vl",
        "qwen3_vl_moe",
        prompt_family="qwen3_vl",
        video_rule="qwen3_vl",
        note="Qwen3VLMoeProcessingInfo only overrides get_hf_config",
        proof=BY_BOTH,
    ),
    _rule(
        "Qwen3_5ForConditionalGeneration",
        "qwen3_5",
        "qwen3_vl",
        "qwen3_5",
        prompt_family="qwen3_vl",
        video_rule="qwen3_vl",
        note="Qwen3_5ProcessingInfo(Qwen3VLProcessingInfo) only overrides get_hf_config; "
        "Gated DeltaNet layers beside full attention (layer_types)",
        proof=BY_VLLM,
    ),
    _rule(
        "Qwen3_5MoeForConditionalGeneration",
        "qwen3_5",
        "qwen3_vl",
        "qwen3_5_moe",
        prompt_family="qwen3_vl",
        video_rule="qwen3_vl",
        note="Qwen3_5MoeProcessingInfo(Qwen3VLProcessingInfo) only overrides get_hf_config; "
        "Gated DeltaNet layers beside full attention (layer_types)",
        proof=BY_VLLM,
    ),
    _rule(
        "DotsOCRForCausalLM",
        "dots_ocr",
        "qwen2_vl",
        "dots_ocr",
        note="DotsOCRProcessingInfo(Qwen2VLProcessingInfo): Qwen2-VL's processor, "
        "<|img|><|imgpad|><|endofimg|>",
        proof=BY_VLLM,
    ),
    _rule(
        "OpenCUAForConditionalGeneration",
        "opencua",
        "qwen2_vl",
        "opencua",
        note="OpenCUAProcessingInfo(Qwen2VLProcessingInfo): Qwen2VLImageProcessor built from "
        "preprocessor_config.json",
        proof=BY_SOURCE,
    ),
    _rule(
        "Qwen2_5OmniModel",
        "qwen2_5_omni_thinker",
        "qwen2_5_vl",
        config_key="thinker_config",
        note="the same thinker and processor as Qwen2_5OmniForConditionalGeneration",
        proof=BY_VLLM,
    ),
    _rule(
        "Qwen2_5OmniForConditionalGeneration",
        "qwen2_5_omni_thinker",
        "qwen2_5_vl",
        "qwen2_5_omni",
        config_key="thinker_config",
        note="image path of Qwen2_5OmniThinkerProcessingInfo (Qwen2_5_VLProcessingInfo), "
        "<|vision_bos|><|IMAGE|><|vision_eos|>",
        proof=BY_VLLM,
    ),
    _rule(
        "Qwen3OmniMoeForConditionalGeneration",
        "qwen3_omni_moe_thinker",
        "qwen2_5_vl",
        "qwen3_omni_moe",
        config_key="thinker_config",
        note="image path of Qwen3OmniMoeThinkerProcessingInfo (Qwen2_5_VLProcessingInfo), "
        "<|vision_start|><|image_pad|><|vision_end|>",
        proof=BY_VLLM,
    ),
    _rule(
        "Alpamayo2Super",
        "alpamayo2_super",
        "alpamayo2_super",
        "alpamayo2_super",
        lifted_key="vlm_config",
        note="Alpamayo2SuperProcessingInfo(Qwen3VLProcessingInfo): Qwen3-VL's count over the "
        "image processor whose size get_hf_processor sets from Alpamayo2SuperConfig's "
        "min_pixels / max_pixels (163,840 / 196,608 when config.json omits them; null keeps "
        "the processor's own), the tower under vlm_config; images only",
        proof=BY_NEW_FAMILIES,
    ),
    _engine(
        "BailingMoeV3VLForConditionalGeneration",
        "bailing_moe_v3_vl",
        _REMOTE_PROCESSOR.format("Qwen2-VL"),
    ),
    _rule(
        "Cosmos3ForConditionalGeneration",
        "cosmos3",
        "qwen3_vl",
        "cosmos3_omni",
        note="Cosmos3ProcessingInfo(Qwen3VLProcessingInfo) only overrides get_hf_config "
        "(Cosmos3OmniConfig); Qwen3-VL's processor, <|vision_start|><|image_pad|><|vision_end|>",
        proof=BY_VLLM,
    ),
    _rule(
        "Cosmos3EdgeForConditionalGeneration",
        "cosmos3_edge",
        "cosmos3_edge",
        "cosmos3_edge",
        note="Cosmos3EdgeProcessingInfo._get_vision_info: Cosmos3EdgeImageProcessor's "
        "smart_resize, Qwen3-VL's video form at one frame and temporal factor 1 (a side under "
        "32 px enlarged first); h·w/1024 between <|vision_start|> and <|vision_end|>; size "
        "the one pixel knob (vLLM drops min_pixels / max_pixels)",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Exaone4_5_ForConditionalGeneration",
        "exaone4_5",
        "qwen2_vl",
        "exaone4_5",
        note="Exaone4_5_ProcessingInfo(Qwen2VLProcessingInfo) only overrides get_hf_config and "
        "get_hf_processor (Exaone4_5_Processor over Qwen2VLImageProcessor), "
        "<vision><|image_pad|></vision>",
        proof=BY_VLLM,
    ),
    _engine(
        "InternS1ProForConditionalGeneration",
        "interns1_pro",
        _REMOTE_PROCESSOR.format("Qwen3-VL"),
    ),
    _engine(
        "InternS2PreviewForConditionalGeneration",
        "interns2_preview",
        _REMOTE_PROCESSOR.format("Qwen3-VL"),
    ),
    _engine(
        "InternS2MobiusForConditionalGeneration",
        "interns2_mobius",
        _REMOTE_PROCESSOR.format("Qwen3-VL"),
    ),
    _engine(
        "OpenPanguVLForConditionalGeneration",
        "openpangu_vl",
        _REMOTE_PROCESSOR.format("Qwen2.5-VL")
        + "; its get_hf_processor drops min_pixels / max_pixels / size",
    ),
    # --- GLM-4.1V smart resize ----------------------------------------------------------------
    _rule("Glm4vForConditionalGeneration", "glm4_1v", "glm4v", "glm4v", proof=BY_BOTH),
    _rule(
        "Glm4vMoeForConditionalGeneration",
        "glm4_1v",
        "glm4v",
        "glm4v_moe",
        note="GLM-4.5V / GLM-4.6V: registered with Glm4vProcessingInfo",
        proof=BY_VLLM,
    ),
    _rule(
        "GlmOcrForConditionalGeneration",
        "glm_ocr",
        "glm4v",
        "glm_ocr",
        note="GLM-OCR: registered with Glm4vProcessingInfo",
        proof=BY_VLLM,
    ),
    _engine(
        "GLM4VForCausalLM",
        "glm4v",
        "GLM-4V (THUDM/glm-4v-9b): a fixed (image_size // patch // 2)**2 = 1,600 tokens "
        "between <|begin_of_image|> and <|end_of_image|> over vLLM's own GLM4VProcessor and "
        "ChatGLMConfig, but its tokenizer is the checkpoint's remote ChatGLM4Tokenizer: not "
        "yet proven",
    ),
    # --- LLaVA family -----------------------------------------------------------------------
    _rule(
        "LlavaForConditionalGeneration",
        "llava",
        "llava",
        "llava",
        note="LLaVA-1.5, or Pixtral-HF when the vision tower is Pixtral",
        proof=BY_BOTH,
    ),
    _rule(
        "LlavaNextForConditionalGeneration",
        "llava_next",
        "llava_next",
        "llava_next",
        proof=BY_BOTH,
    ),
    _rule(
        "LlavaOnevisionForConditionalGeneration",
        "llava_onevision",
        "llava_onevision",
        "llava_onevision",
        proof=BY_BOTH,
    ),
    _engine("LlavaNextVideoForConditionalGeneration", "llava_next_video", "videos only in vLLM"),
    _engine(
        "LlavaOnevision2ForConditionalGeneration",
        "llava_onevision2",
        "its processor is the checkpoint's remote code (a bare class vLLM assembles by hand), "
        "in neither transformers nor vLLM: not proven here",
    ),
    _engine(
        "BeeForConditionalGeneration",
        "bee",
        "LLaVA-NeXT's count with OneVision's anyres_max from config.json; its HF processor "
        "is the checkpoint's remote code (in neither transformers nor vLLM): not proven here",
    ),
    _rule(
        "Granite4VisionForConditionalGeneration",
        "granite4_vision",
        "granite4_vision",
        "granite4_vision",
        note="Granite4VisionProcessingInfo.get_num_image_tokens: LLaVA-NeXT's anyres count "
        "on the patch grid times downsample_rate (base tile and grid tiles), whatever the "
        "select strategy; checkpoint values not transcribed (see docs)",
        proof=BY_NEW_FAMILIES,
    ),
    _engine(
        "RForConditionalGeneration",
        "rvl",
        "LlavaNextProcessingInfo's count unchanged; its HF processor is the checkpoint's "
        "remote code (in neither transformers nor vLLM): not proven here",
    ),
    # --- Pixtral / Mistral 3 ----------------------------------------------------------------
    _rule(
        "Mistral3ForConditionalGeneration",
        "mistral3",
        "mistral3",
        "mistral3",
        proof=BY_BOTH,
    ),
    _rule(
        "LightOnOCRForConditionalGeneration",
        "lightonocr",
        "lightonocr",
        note="config.json's model_type is mistral3: dispatched by its architecture; "
        "LightOnOCRProcessingInfo(Mistral3ProcessingInfo): rows x cols patch tokens "
        "fitted into vision_config.image_size, no break or end tokens",
        proof=BY_VLLM,
    ),
    _engine(
        "PixtralForConditionalGeneration",
        "pixtral",
        "Mistral's own format (params.json, mistral_common tokenizer)",
    ),
    # --- Gemma ---------------------------------------------------------------------------------
    _rule("Gemma3ForConditionalGeneration", "gemma3_mm", "gemma3", "gemma3", proof=BY_BOTH),
    _rule(
        "Gemma3nForConditionalGeneration",
        "gemma3n_mm",
        "gemma3n",
        "gemma3n",
        note="Gemma3nProcessor.full_image_sequence: \\n\\n<start_of_image> + 256 soft "
        "tokens + <end_of_image>\\n\\n, newlines merged as in Gemma 3",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Gemma4ForConditionalGeneration",
        "gemma4_mm",
        "gemma4",
        "gemma4",
        note="Gemma4ProcessingInfo._compute_num_soft_tokens: scaled to max_soft_tokens; KV: "
        "global layers of global_head_dim (num_global_key_value_heads where attention_k_eq_v), "
        "the num_kv_shared_layers hold none, pages unified as unify_kv_cache_spec_page_size",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Gemma4UnifiedForConditionalGeneration",
        "gemma4_unified",
        "gemma4_unified",
        "gemma4_unified",
        note="Gemma4UnifiedProcessingInfo: Gemma 4's soft-token count, its budget read from "
        "vision_config.num_soft_tokens, over transformers' Gemma4UnifiedProcessor",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "DiffusionGemmaForBlockDiffusion",
        "diffusion_gemma",
        "gemma4",
        "diffusion_gemma",
        note="DiffusionGemmaProcessingInfo(Gemma4ProcessingInfo) only overrides get_hf_config "
        "(DiffusionGemmaConfig) and drops audio; Gemma 4's processor and soft tokens",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "PaliGemmaForConditionalGeneration",
        "paligemma",
        "paligemma",
        "paligemma",
        note="PaliGemma 1 / 2: SigLIP's (image_size / patch)**2 <image> tokens + the <bos> "
        "vLLM inserts behind them, whatever the size; the newline its apply() appends is one "
        "wrapper token (one above where the prompt already ends with one)",
        proof=BY_NEW_FAMILIES,
    ),
    # --- InternVL -----------------------------------------------------------------------------
    _rule(
        "InternVLForConditionalGeneration",
        "interns1",
        "internvl",
        "internvl",
        note="the Hugging Face format (-hf checkpoints), served by interns1.py's "
        "InternS1ProcessingInfo",
        proof=BY_BOTH,
    ),
    _rule(
        "InternS1ForConditionalGeneration",
        "interns1",
        "internvl",
        "interns1",
        note="InternS1ProcessingInfo: InternVLProcessor with GotOcr2's 448 px tiles",
        proof=BY_SOURCE,
    ),
    _rule(
        "InternVLChatModel",
        "internvl",
        "internvl_chat",
        "internvl_chat",
        note="the original chat format: vLLM's InternVLChatProcessor, 448 px tiles + "
        "thumbnail, <img><IMG_CONTEXT>...</img>",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Eagle2_5_VLForConditionalGeneration",
        "eagle2_5_vl",
        "eagle2_5_vl",
        note="InternVLChatProcessor; tiles of force_image_size (else vision_config.image_size)",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "H2OVLChatModel",
        "h2ovl",
        "h2ovl",
        note="H2OVLProcessor: InternVL chat's tiles, or MSAC's two passes (a lone image), "
        "priced at the larger: exact for one image, never low for more",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "NVLM_D",
        "nvlm_d",
        "nvlm_d",
        note="NVLMProcessor: InternVLChatProcessor's tiles (1-6 + thumbnail), each tagged "
        "<tile_k>, the tags counted by the checkpoint's tokenizer.json",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "SkyworkR1VChatModel",
        "skyworkr1v",
        "internvl_chat",
        note="SkyworkR1VProcessingInfo: InternVLChatProcessor, as InternVLChatModel",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Llama_Nemotron_Nano_VL",
        "nemotron_vl",
        "nemotron_vl",
        note="LlamaNemotronNanoVLProcessor: InternVL chat's <img><image>...</img> over its own "
        "size-weighted grid choice (1 to max_num_tiles + thumbnail), values from "
        "preprocessor_config.json",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "QianfanOCRForConditionalGeneration",
        "qianfan_ocr",
        "qianfan_ocr",
        "qianfan_ocr",
        note="QianfanOCRProcessingInfo: InternVLChatProcessor over transformers' "
        "QianfanOCRConfig (vision sizes as pairs, the first taken), InternVL chat's tiles "
        "and <img><IMG_CONTEXT>...</img>",
        proof=BY_NEW_FAMILIES,
    ),
    # --- Nemotron Nano VL v2, Nemotron-H Omni V3 -------------------------------------------------
    _rule(
        "NemotronH_Nano_VL_V2",
        "nano_nemotron_vl",
        "nano_nemotron_vl",
        note="NanoNemotronVLProcessor: InternVL's tiler (1 to max_num_tiles + thumbnail), "
        "exact; or its dynamic resolution, priced at the most any budget a request can hand "
        "the image gives (never low)",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "NemotronH_Nano_Omni_Reasoning_V3",
        "nano_nemotron_vl",
        "nano_nemotron_vl",
        note="registered with NemotronH_Nano_VL_V2's class and processor",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "NemotronH_Super_Omni_Reasoning_V3",
        "nano_nemotron_vl",
        "nano_nemotron_vl",
        note="registered with NemotronH_Nano_VL_V2's class and processor",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "NemotronH_Omni_Reasoning_V3",
        "nano_nemotron_vl",
        "nano_nemotron_vl",
        note="registered with NemotronH_Nano_VL_V2's class and processor",
        proof=BY_NEW_FAMILIES,
    ),
    # --- Ovis 2.5 / 2.6 --------------------------------------------------------------------------
    _rule(
        "Ovis2_5",
        "ovis2_5",
        "ovis2_5",
        "ovis2_5",
        note="Ovis2_5Processor's own smart_resize (32 px) within [448², 1792²] px: "
        "2 + cells; no size refused, no pixel kwargs",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Ovis2_6ForCausalLM",
        "ovis2_5",
        "ovis2_5",
        note="registered with Ovis 2.5's class and processor",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Ovis2_6_MoeForCausalLM",
        "ovis2_5",
        "ovis2_5",
        note="registered with Ovis 2.5's class and processor",
        proof=BY_NEW_FAMILIES,
    ),
    # --- DeepSeek-OCR, DeepSeek-OCR-2 -----------------------------------------------------------
    _rule(
        "DeepseekOCRForCausalLM",
        "deepseek_ocr",
        "deepseek_ocr",
        note="DeepseekOCRProcessingInfo.get_num_image_tokens: vLLM's constants (1024 px global "
        "view, 2-6 tiles of 640 px past 640 px a side, row newlines) + separator",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "DeepseekOCR2ForCausalLM",
        "deepseek_ocr2",
        "deepseek_ocr2",
        note="DeepseekOCR2ProcessingInfo.get_num_image_tokens: as OCR with 768 px tiles, "
        "no newlines",
        proof=BY_NEW_FAMILIES,
    ),
    # --- DeepSeek-VL2 ---------------------------------------------------------------------------
    _rule(
        "DeepseekVLV2ForCausalLM",
        "deepseek_vl2",
        "deepseek_vl2",
        "deepseek_vl_v2",
        note="DeepseekVL2ProcessingInfo.get_num_image_tokens: global view + the best candidate "
        "resolution's local views; priced as cropped (vLLM crops prompts of at most 2 images), "
        "above vLLM's count for prompts of 3 or more; KV: MLA's latent per token (VL2-small, "
        "VL2), per-head K and V where the qk dims are 0 (VL2-tiny)",
        proof=BY_NEW_FAMILIES,
    ),
    # --- MiniCPM-V 4.6 / 4.7 ---------------------------------------------------------------------
    _rule(
        "MiniCPMV4_6ForConditionalGeneration",
        "minicpmv4_6",
        "minicpmv4_6",
        "minicpmv4_6",
        note="MiniCPMV4_6ProcessingInfo._compute_visual_tokens: a source image and up to "
        "max_slice_nums slices of ~448² px, 16 (or 4) patches a token, <image_id>/<slice> markup",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "MiniCPMV4_7ForConditionalGeneration",
        "minicpmv4_7",
        "minicpmv4_7",
        "minicpmv4_7",
        note="4.6's count; max_slice_nums from config.json unless the server sets it",
        proof=BY_NEW_FAMILIES,
    ),
    # --- MiniCPM-V 2.6 / 4.0 / 4.5, MiniCPM-o 2.6 ------------------------------------------------
    _rule(
        "MiniCPMV",
        "minicpmv",
        "minicpmv",
        "minicpmv",
        note="2.6 / 4.0 / 4.5: vLLM's prompt update over the remote image processor's "
        "get_slice_image_placeholder (a source image and up to max_slice_nums slices of ~448² "
        "px, 64 tokens each, <image_id>/<slice> markup); 2.0 / 2.5 priced by the engine",
        proof=BY_PLACEHOLDER_STANDIN,
    ),
    _rule(
        "MiniCPMO",
        "minicpmo",
        "minicpmo",
        "minicpmo",
        note="2.6: MiniCPMV 2.6's image path (MiniCPMOProcessingInfo inherits it); 4.5 "
        "priced by the engine; audio keeps the per-item allowance",
        proof=BY_PLACEHOLDER_STANDIN,
    ),
    # --- Kimi-K2.5 / K2.6, Kimi-VL (MoonViT) ----------------------------------------------------
    _rule(
        "KimiK25ForConditionalGeneration",
        "kimi_k25",
        "kimi_k25",
        "kimi_k25",
        note="vLLM's fused navit_resize_image: scaled to in_patch_limit patches (512 a side), "
        "padded to 28 px cells; no size refused; media_proc_cfg kwargs ignored, as by vLLM; "
        "KV: the DeepSeek-V3 tower's MLA latent per token",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "KimiVLForConditionalGeneration",
        "kimi_vl",
        "kimi_vl",
        "kimi_vl",
        note="KimiVLProcessingInfo.get_num_image_tokens: scaled to in_token_limit patches, "
        "padded to 28 px cells; a padded side of 512 patches refused (the remote processor's "
        "Exceed pos emb); no kwargs priced; KV: the Moonlight tower's MLA latent per token",
        proof=BY_COUNT_STANDIN,
    ),
    # --- Keye-VL ---------------------------------------------------------------------------------
    _rule(
        "KeyeForConditionalGeneration",
        "keye",
        "keye",
        "Keye",
        note="KeyeProcessingInfo._get_vision_info: vLLM's copy of Keye's smart_resize (28 px, "
        "PaddleOCR-VL's) within the image processor's min/max_pixels; no kwargs priced",
        proof=BY_COUNT_STANDIN,
    ),
    _rule(
        "KeyeVL1_5ForConditionalGeneration",
        "keye_vl1_5",
        "keye",
        "KeyeVL1_5",
        note="KeyeVL1_5ProcessingInfo inherits Keye's count for images (videos not priced)",
        proof=BY_COUNT_STANDIN,
    ),
    # --- ERNIE-4.5-VL -----------------------------------------------------------------------------
    _rule(
        "Ernie4_5_VLMoeForConditionalGeneration",
        "ernie45_vl",
        "ernie45_vl",
        "ernie4_5_moe_vl",
        note="Ernie4_5VLMultiModalProcessor._get_prompt_updates over the remote processor's "
        "grid: Qwen2-VL's smart_resize (28 px) within its image_min_pixels / image_max_pixels "
        "(3,136 to 4,842,768 px); over 200:1 refused; image_min/max_pixels the only kwargs "
        "priced (videos not priced)",
        proof=BY_COUNT_STANDIN,
    ),
    # --- LFM2-VL ----------------------------------------------------------------------------------
    _rule(
        "Lfm2VlForConditionalGeneration",
        "lfm2_vl",
        "lfm2_vl",
        "lfm2_vl",
        note="Lfm2VLProcessingInfo.get_image_repl: a smart_resize thumbnail (64..256 tokens), "
        "and for a large image 2..10 tiles of 512 px (256 tokens and a row/col token each); "
        "KV: the conv layers hold a short-convolution state per sequence, not per-token KV",
        proof=BY_NEW_FAMILIES,
    ),
    # --- Molmo -----------------------------------------------------------------------------------
    _rule(
        "MolmoForCausalLM",
        "molmo",
        "molmo",
        "molmo",
        note="get_insertion_molmo: a 12x12 low-res view + 1..max_crops (12) crops of 336 px "
        "overlapping by 4+4 patches, pooled 2x2, a column token per row and each view framed "
        "(316 tokens for a small image); no kwargs priced (all reach the remote processor)",
        proof=BY_COUNT_STANDIN,
    ),
    # --- Molmo 2 ---------------------------------------------------------------------------------
    _rule(
        "Molmo2ForConditionalGeneration",
        "molmo2",
        "molmo2",
        "molmo2",
        note="get_image_replacement_molmo2: a 378 px low-res view + 1..max_crops (8) crops "
        "overlapping by 4+4 patches, pooled 2x2, a column token per row and each view framed "
        "(424..1,414 tokens); max_crops, overlap_margins, pooling_size and the column-token "
        "switches honoured at the top level; videos per item",
        proof=BY_NEW_FAMILIES,
    ),
    # --- Phi-3-Vision / Phi-3.5-Vision ----------------------------------------------------------
    _rule(
        "Phi3VForCausalLM",
        "phi3v",
        "phi3v",
        "phi3_v",
        note="Phi3VProcessingInfo.get_num_image_tokens: the remote processor's "
        "calc_num_image_tokens_from_image_size, a global 336 px view + HD crops of 336 px "
        "(num_crops: 4 shipped with 3.5, 16 with 128k), 144 tokens each and 12 newlines a row; "
        "a side resized to 0 px refused (the remote processor's); num_crops the one kwarg",
        proof=BY_COUNT_STANDIN,
    ),
    # --- Phi-4-multimodal ------------------------------------------------------------------------
    _rule(
        "Phi4MMForCausalLM",
        "phi4mm",
        "phi4mm",
        "phi4mm",
        note="Phi4MMProcessingInfo._compute_num_image_tokens: a global 448 px view + HD crops "
        "(dynamic_hd, 36 shipped), padding left out of the feature map; a fitted side under "
        "10 px refused (the remote processor's); dynamic_hd the one kwarg; audio per item",
        proof=BY_COUNT_STANDIN,
    ),
    # --- PaddleOCR-VL ---------------------------------------------------------------------------
    _rule(
        "PaddleOCRVLForConditionalGeneration",
        "paddleocr_vl",
        "paddleocr_vl",
        "paddleocr_vl",
        note="PaddleOCRVLProcessingInfo.get_num_image_tokens: vLLM's own smart_resize "
        "(28 px), <|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>",
        proof=BY_NEW_FAMILIES,
    ),
    # --- Idefics3 / SmolVLM -------------------------------------------------------------------
    _rule(
        "Idefics3ForConditionalGeneration",
        "idefics3",
        "idefics3",
        "idefics3",
        proof=BY_BOTH,
    ),
    _rule("SmolVLMForConditionalGeneration", "smolvlm", "smolvlm", "smolvlm", proof=BY_BOTH),
    # --- Llama 4 ------------------------------------------------------------------------------
    _rule("Llama4ForConditionalGeneration", "mllama4", "llama4", "llama4", proof=BY_BOTH),
    # --- Cohere2Vision (Command A Vision) ------------------------------------------------------
    _rule(
        "Cohere2VisionForConditionalGeneration",
        "cohere2_vision",
        "cohere2_vision",
        "cohere2_vision",
        note="Cohere2VisionProcessingInfo.get_num_patches: transformers' "
        "get_number_of_image_patches (1..max_patches tiles of 512 px, least upscale, + a "
        "thumbnail), 257 tokens a tile + 2; crop_to_patches, min/max_patches top level only",
        proof=BY_NEW_FAMILIES,
    ),
    # --- Step3-VL (StepVL and Step3p7 inherit its processing) ----------------------------------
    _rule(
        "Step3VLForConditionalGeneration",
        "step3_vl",
        "step3_vl",
        "step3_vl",
        note="vLLM's own Step3VLProcessor: a 728 px global view (171 tokens) + ImagePatcher's "
        "windows of up to 504 px (83 each, a newline a row but the last); "
        "vision_config.enable_patch read; server kwargs never reach it (accepted, ignored)",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "StepVLForConditionalGeneration",
        "step_vl",
        "step3_vl",
        note="Step3-VL's class, processor and count (inherited registration)",
        proof=BY_NEW_FAMILIES,
    ),
    _rule(
        "Step3p7ForConditionalGeneration",
        "step3p7",
        "step3_vl",
        note="Step3-VL's class, processor and count (inherited registration)",
        proof=BY_NEW_FAMILIES,
    ),
    # --- No rule yet --------------------------------------------------------------------------
    _rule(
        "AriaForConditionalGeneration",
        "aria",
        "aria",
        "aria",
        note="AriaProcessingInfo.get_num_image_tokens: the projector's most queries (256) "
        "per image, whatever the size; split_image or a 490 px crop refused",
        proof=BY_NEW_FAMILIES,
    ),
    _engine(
        "BagelForConditionalGeneration",
        "bagel",
        "each <|image_pad|> replaced by vit_max_num_patch_per_side**2 tokens whatever the size, "
        "but over the checkpoint's own image processor (cached_get_image_processor, remote with "
        "--trust-remote-code): not yet proven",
    ),
    _rule(
        "Blip2ForConditionalGeneration",
        "blip2",
        "blip2",
        "blip-2",
        note="Blip2ProcessingInfo.get_num_image_tokens: config.json's num_query_tokens "
        "<image> tokens (32) inserted at the prompt's start, whatever the size; one image a "
        "prompt",
        proof=BY_NEW_FAMILIES,
    ),
    _engine(
        "CohereCompassForConditionalGeneration",
        "cohere_compass",
        "its own _get_vision_info (a Qwen-style smart_resize over transformers' "
        "CohereCompassImageProcessor, the size / min_pixels / max_pixels kwargs merged): a rule "
        "of its own, not yet written",
    ),
    _engine(
        "DeepseekV4ForConditionalGeneration",
        "vllm.models.deepseek_v4",
        "vLLM's own port of the checkpoint's processor (common/mm_preprocess.py): an image "
        "resized to a token budget (solve_resize_ratio) in sentinel-framed blocks, a rule of "
        "its own, not yet written",
    ),
    _engine(
        "DeepseekV41ForCausalLM",
        "vllm.models.deepseek_v41",
        "as DeepSeek-V4: vLLM's own port (common/mm_preprocess.py, solve_resize_ratio to a "
        "token budget), a rule of its own, not yet written",
    ),
    _engine(
        "Dots3NoteForCausalLM",
        "vllm.models.dots3_note",
        "vLLM's own Dots3NoteProcessor (common/processor.py): its own factor-rounded resize "
        "(Dots3NoteImageProcessor.resized_size), a rule of its own, not yet written",
    ),
    _engine(
        "UnlimitedOCRForCausalLM",
        "unlimited_ocr",
        "DeepSeek-OCR's count at 32 crops, not 6 (vLLM's own UnlimitedOCRProcessor; one crop "
        "beside other images): the deepseek_ocr rule fixes vLLM's 6, not yet parametrised",
    ),
    _engine(
        "Glm5NextForConditionalGeneration",
        "vllm.models.glm5next",
        "Glm4vProcessingInfo with its own _get_vision_info (a pixel budget from the processor "
        "and its patch_expand_factor): not GLM-4.1V's count, not yet written",
    ),
    _engine(
        "IsaacForConditionalGeneration",
        "isaac",
        "the count is read off the image_grid_thw that vLLM's own IsaacProcessor returns (a "
        "patch-budget resize, get_image_size_for_max_num_patches): a rule of its own, not yet "
        "written",
    ),
    _engine(
        "KananaVForConditionalGeneration",
        "kanana_v",
        "its processor is the checkpoint's remote code (AutoProcessor; vLLM even takes "
        "smart_resize from that processor's module), absent here",
    ),
    _engine(
        "KimiK3ForConditionalGeneration",
        "vllm.models.kimi_k3",
        "Kimi-K2.5's fused vision processor (navit_resize_image) under KimiK3Processor's own "
        "<|media_pad|> markup: not yet proven equal to the kimi_k25 rule",
    ),
    _engine(
        "MiMoV2OmniForCausalLM",
        "mimo_v2_omni",
        "its own _get_vision_info (Qwen2-VL's smart_resize over vLLM's own MiMoOmniProcessor, "
        "the size kwargs merged) and omni markup: not yet proven equal to the Qwen rules",
    ),
    _engine(
        "MiniMaxM3SparseForConditionalGeneration",
        "vllm.models.minimax_m3",
        "vLLM's own port of the checkpoint's remote MiniMaxVLProcessor "
        "(common/mm_preprocess.py, a Qwen-style smart_resize): not yet proven equal to the Qwen "
        "rules",
    ),
    _engine(
        "MiniCPMOcrForConditionalGeneration",
        "minicpm_ocr",
        "an unsliced image's resize tier is picked from its pixels (Otsu threshold), not its size",
    ),
    _engine(
        "Moondream3ForCausalLM",
        "moondream3",
        "a fixed 730 (<|endoftext|> + 729 image tokens) replacing <|endoftext|><image>, over "
        "vLLM's own Moondream3Processor: not yet proven",
    ),
    _engine(
        "HfMoondream",
        "moondream3",
        "as Moondream3ForCausalLM: a fixed 730 over vLLM's own Moondream3Processor, not yet proven",
    ),
    _engine(
        "MuseGlimmerForConditionalGeneration",
        "muse_glimmer",
        "the count is read off the image_grid_thw that transformers' MuseGlimmerProcessor "
        "returns: a rule of its own, not yet written",
    ),
    _engine(
        "MuseSparkForConditionalGeneration",
        "vllm.models.muse_spark",
        "vLLM's own preprocessing (common/processor.py: find_resize_target, a least-distortion "
        "patch-grid fit): a rule of its own, not yet written",
    ),
    _rule(
        "OpenVLAForActionPrediction",
        "openvla",
        "openvla",
        "openvla",
        note="OpenVLAProcessingInfo.get_num_image_tokens: (image_sizes[0] // 14)**2 = 256 "
        "tokens inserted after <s>, whatever the size; vLLM's own processor, 224 px only",
        proof=BY_NEW_FAMILIES,
    ),
    _engine(
        "Ovis",
        "ovis",
        "vLLM's own OvisProcessor: up to 9 partitions of the image, each a fixed segment; a "
        "tiling rule of its own, not yet written",
    ),
    _engine(
        "Phi4ForCausalLMV",
        "phi4siglip",
        "the count is read off the patch grid the remote NaFlex processor returns (absent here)",
    ),
    _engine(
        "Qwen4ExpForConditionalGeneration",
        "vllm.models.qwen4_exp",
        "Qwen3VLProcessingInfo with only the config class changed (Qwen4ExpConfig), but its "
        "language model's cache (a hybrid with inner state) is not yet read by the sidecar's KV "
        "geometry",
    ),
    _engine(
        "Step5ForConditionalGeneration",
        "vllm.models.step5",
        "inherits Step 3.7's registration (the step3_vl rule's crops): not yet proven under "
        "its own config class",
    ),
    _engine("NemotronParseForConditionalGeneration", "nemotron_parse", "encoder-decoder"),
    _engine("RadioMBartPrefixForCausalLM", "nemotron_parse3_5", "encoder-decoder"),
    # --- Dropped by vLLM (_PREVIOUSLY_SUPPORTED_MODELS) --------------------------------------
    _dropped(
        "MllamaForConditionalGeneration",
        "0.10.2",
        "mllama",
        note="Llama 3.2 Vision: encoder-decoder, removed with vLLM's V0 engine",
    ),
    _dropped("AyaVisionForConditionalGeneration", "0.24.0", "aya_vision"),
    _dropped("Phi4MultimodalForCausalLM", "0.12.0", "phi4_multimodal"),
    _dropped("QwenVLForConditionalGeneration", "0.23.0"),
    _dropped("InternLM2VEForCausalLM", "0.23.0"),
    _dropped("MiniMaxVL01ForConditionalGeneration", "0.23.0", "minimax_vl_01"),
    _dropped("TarsierForConditionalGeneration", "0.24.0"),
    _dropped("Tarsier2ForConditionalGeneration", "0.23.0"),
    _dropped("MantisForConditionalGeneration", "0.24.0"),
    _dropped("FuyuForCausalLM", "0.25.0", "fuyu"),
    _dropped("ChameleonForConditionalGeneration", "0.28.0", "chameleon"),
    _dropped("HCXVisionForCausalLM", "0.28.0"),
    _dropped("DonutForConditionalGeneration", "0.10.2"),
)

ARCHITECTURES: dict[str, Architecture] = {entry.name: entry for entry in _TABLE}
# The rest of vLLM 0.33's _MULTIMODAL_MODELS: audio and video models that take no images.
NO_IMAGE_ARCHITECTURES = frozenset(
    {
        "AudioFlamingo3ForConditionalGeneration",
        "CohereAsrForConditionalGeneration",
        "FireRedASR2ForConditionalGeneration",
        "FunASRForConditionalGeneration",
        "FunAudioChatForConditionalGeneration",
        "GlmAsrForConditionalGeneration",
        "GraniteSpeechForConditionalGeneration",
        "GraniteSpeechPlusForConditionalGeneration",
        "MiDashengLMModel",
        "MoonshotKimiaForCausalLM",
        "MossAudioModel",
        "MossTranscribeDiarizeForConditionalGeneration",
        "LlavaNextVideoForConditionalGeneration",  # its limit is {"video": 1}
        "Qwen2AudioForConditionalGeneration",
        "Qwen3ASRForConditionalGeneration",
        "Qwen3ASRRealtimeGeneration",
        "UltravoxModel",
        "VoxtralForConditionalGeneration",
        "VoxtralRealtimeGeneration",
        "WhisperForConditionalGeneration",
    }
)
# A config without ``architectures`` is dispatched by model_type; each names one entry.
_BY_MODEL_TYPE: dict[str, Architecture] = {
    model_type: entry for entry in _TABLE for model_type in entry.model_types
}

ENGINE_PRICING_HINT = (
    "price it through the engine (SIDECAR_PRICING=engine) until the sidecar has a rule for it"
)


def find_architecture(config: Mapping[str, Any]) -> Architecture | None:
    """The table's entry for a ``config.json``: its first known ``architectures`` entry (vLLM's
    registry tries them in order); only a config naming no architecture is dispatched by its
    ``model_type``. None when neither is known."""
    names = config.get("architectures")
    if isinstance(names, Sequence) and not isinstance(names, str) and names:
        for name in names:
            entry = ARCHITECTURES.get(str(name))
            if entry is not None:
                return entry
        return None
    return _BY_MODEL_TYPE.get(str(config.get("model_type", "")))


def resolve_architecture(
    name: str, config: Mapping[str, Any], *, engine_pricing: bool = False
) -> Architecture:
    """The entry that prices ``name``'s images; ConfigurationError naming what to do for an
    architecture vLLM 0.33 does not serve, one without a rule, or an unknown one.

    With ``engine_pricing`` (SIDECAR_PRICING ``auto`` or ``engine``) an architecture without
    a rule is returned as it is (``Support.NEEDS_ENGINE``: vLLM prices every size), and so is
    one the registry does not name, which vLLM serves through its Transformers backend."""
    entry = find_architecture(config)
    described = _described(config)
    audio = [str(n) for n in config.get("architectures") or () if n in NO_IMAGE_ARCHITECTURES]
    if entry is None and audio:
        raise ConfigurationError(
            f"model {name!r} is {audio[0]}, which vLLM 0.33 serves for audio or video only: "
            "it takes no images, so there is nothing for the sidecar to price"
        )
    if entry is None and engine_pricing:
        return Architecture(described, Support.NEEDS_ENGINE, "transformers")
    if entry is None:
        raise ConfigurationError(
            f"model {name!r} is {described}, which is not an image architecture of vLLM "
            f"0.33's registry (if vLLM serves it through its Transformers backend, "
            f"{ENGINE_PRICING_HINT}); the sidecar prices: {', '.join(priced_architectures())}"
        )
    if entry.support is Support.NOT_SERVED:
        raise ConfigurationError(
            f"model {name!r} is {entry.name}, which vLLM supported until v{entry.dropped_after} "
            "and vLLM 0.33 does not serve (registry.py _PREVIOUSLY_SUPPORTED_MODELS); serve it "
            "with that vLLM and price it there, or choose a model vLLM 0.33 serves"
        )
    if entry.support is Support.NEEDS_ENGINE and not engine_pricing:
        raise ConfigurationError(
            f"model {name!r} is {entry.name} (vLLM 0.33: {entry.vllm_module}), for which the "
            f"sidecar has no image rule yet: {ENGINE_PRICING_HINT}"
        )
    return entry


def priced_architectures() -> list[str]:
    """The architectures a rule prices, sorted."""
    return sorted(name for name, entry in ARCHITECTURES.items() if entry.support is Support.RULE)


def _described(config: Mapping[str, Any]) -> str:
    names = config.get("architectures")
    if isinstance(names, Sequence) and not isinstance(names, str) and names:
        return f"architectures {[str(name) for name in names]}"
    return f"model_type {str(config.get('model_type', ''))!r} with no architectures"


_STATUS = {
    Support.RULE: "exact rule",
    Support.NEEDS_ENGINE: "priced by the engine",
    Support.NOT_SERVED: "not served by vLLM 0.33",
}


def supported_models_markdown() -> str:
    """The table of every architecture in ``docs/supported-models.md`` (a test keeps the page
    equal to it, so the table here stays the one home)."""
    rows = [
        "| Architecture | vLLM 0.33 module | Status | Rule | Proven against | Notes |",
        "|---|---|---|---|---|---|",
    ]
    for entry in _TABLE:
        status = _STATUS[entry.support]
        if entry.support is Support.NOT_SERVED:
            status += f" (last served by v{entry.dropped_after})"
        notes = entry.note.replace("|", "\\|")  # a table cell: Qwen's <|tokens|> escaped
        if entry.config_key is not None:
            notes = f"config under `{entry.config_key}`; {notes}"
        rows.append(
            f"| `{entry.name}` | {entry.vllm_module or '-'} | {status} | "
            f"{entry.rule or '-'} | {entry.proof or '-'} | {notes} |"
        )
    return "\n".join(rows) + "\n"
