"""Model profiles: a vision rule plus KV geometry, from a built-in name or a model directory.

A profile is everything the prediction needs to know about the served model. It is
built once at start-up from the same ``config.json`` and ``preprocessor_config.json``
that vLLM reads, then adjusted by the deployment's overrides, which mirror vLLM's
flags (``--mm-processor-kwargs`` pixel bounds, ``--kv-cache-dtype``,
``--tensor-parallel-size``, ``--block-size``). Reading the language model's KV geometry
out of ``config.json`` is ``model_config``'s; this module pairs it with the vision and
video rules registered per ``model_type``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sidecar.errors import ConfigurationError
from sidecar.profiles.architectures import (
    ENGINE_PRICING_HINT,
    Architecture,
    Support,
    resolve_architecture,
)
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.profiles.kv_geometry import (
    GDN_PREFILL_CHECKPOINT_TOKENS,
    STATE_DTYPE_BYTES,
    KvGeometry,
    RecurrentKind,
    default_block_tokens,
)
from sidecar.profiles.model_config import read_text_model, text_config, validated_context_tokens
from sidecar.profiles.processor_kwargs import SERVER_KWARGS, ProcessorKwargs
from sidecar.settings import Settings
from sidecar.video import VideoRule
from sidecar.video.qwen import QwenVideoRule
from sidecar.vision import MODEL_DIRECTORY, PixelLimited, VisionRule, nano_nemotron_vl
from sidecar.vision.anyres import AnyresRule
from sidecar.vision.cohere2_vision import PROCESSOR_KNOBS as COHERE2_VISION_KNOBS
from sidecar.vision.cohere2_vision import Cohere2VisionRule
from sidecar.vision.deepseek_ocr import PROCESSOR_KNOBS as DEEPSEEK_OCR_KNOBS
from sidecar.vision.deepseek_ocr import DeepseekOCRRule
from sidecar.vision.deepseek_vl2 import DeepseekVL2Rule
from sidecar.vision.engine_only import EngineOnlyRule
from sidecar.vision.ernie45_vl import PROCESSOR_KNOBS as ERNIE45_VL_KNOBS
from sidecar.vision.ernie45_vl import Ernie45VLRule
from sidecar.vision.fixed import FixedTokensRule
from sidecar.vision.gemma3 import Gemma3Rule
from sidecar.vision.gemma4 import PROCESSOR_KNOBS as GEMMA4_KNOBS
from sidecar.vision.gemma4 import Gemma4Rule
from sidecar.vision.glm4v import Glm4vSmartResizeRule
from sidecar.vision.h2ovl import PROCESSOR_KNOBS as H2OVL_KNOBS
from sidecar.vision.h2ovl import H2OVLRule
from sidecar.vision.idefics3 import SplitImageRule
from sidecar.vision.internvl import InternVLRule
from sidecar.vision.internvl_chat import PROCESSOR_KNOBS as INTERNVL_CHAT_KNOBS
from sidecar.vision.internvl_chat import InternVLChatRule
from sidecar.vision.keye import KeyeRule
from sidecar.vision.lfm2_vl import PROCESSOR_KNOBS as LFM2_VL_KNOBS
from sidecar.vision.lfm2_vl import Lfm2VlRule
from sidecar.vision.llama4 import Llama4Rule
from sidecar.vision.minicpmv import PROCESSOR_KNOBS as MINICPMV_KNOBS
from sidecar.vision.minicpmv import MiniCPMVRule, minicpmo_declines, minicpmv_declines
from sidecar.vision.minicpmv4_6 import PROCESSOR_KNOBS as MINICPMV4_6_KNOBS
from sidecar.vision.minicpmv4_6 import MiniCPMV4_6Rule
from sidecar.vision.molmo2 import PROCESSOR_KNOBS as MOLMO2_KNOBS
from sidecar.vision.molmo2 import Molmo2Rule, MolmoRule
from sidecar.vision.moonvit import PROCESSOR_KNOBS as KIMI_K25_KNOBS
from sidecar.vision.moonvit import KimiK25Rule, KimiVLRule
from sidecar.vision.nemotron_vl import PROCESSOR_KNOBS as NEMOTRON_VL_KNOBS
from sidecar.vision.nemotron_vl import NemotronVLRule
from sidecar.vision.nvlm_d import NVLMRule
from sidecar.vision.ovis2_5 import Ovis2_5Rule
from sidecar.vision.paddleocr_vl import PaddleOCRVLRule
from sidecar.vision.phi3v import PROCESSOR_KNOBS as PHI3V_KNOBS
from sidecar.vision.phi3v import Phi3VRule
from sidecar.vision.phi4mm import PROCESSOR_KNOBS as PHI4MM_KNOBS
from sidecar.vision.phi4mm import Phi4MMRule
from sidecar.vision.pixtral import PixtralRule
from sidecar.vision.qwen import QwenSmartResizeRule
from sidecar.vision.step3_vl import PROCESSOR_KNOBS as STEP3_VL_KNOBS
from sidecar.vision.step3_vl import Step3VLRule

_KV_CACHE_DTYPE_BYTES = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}

VisionRuleFactory = Callable[[str, dict[str, Any], dict[str, Any]], VisionRule]


def _llava_rule(family: str, config: dict[str, Any], preprocessor: dict[str, Any]) -> VisionRule:
    """LLaVA-1.5, or Pixtral when the LLaVA wrapper holds a Pixtral tower (pixtral-12b)."""
    if (config.get("vision_config") or {}).get("model_type") == "pixtral":
        return PixtralRule.from_configs("pixtral", config, preprocessor)
    return FixedTokensRule.from_llava_configs(family, config, preprocessor)


VideoRuleFactory = Callable[[str, dict[str, Any], dict[str, Any]], VideoRule]


# Families whose videos are priced exactly (an architecture's ``video_rule``); the others get
# SIDECAR_VIDEO_TOKENS_PER_ITEM.
VIDEO_RULES: dict[str, VideoRuleFactory] = {
    "qwen2_vl": QwenVideoRule.from_configs,
    "qwen2_5_vl": QwenVideoRule.from_configs,
    "qwen3_vl": QwenVideoRule.from_configs,
}

# Each rule family's constructor, keyed by the name ``architectures.ARCHITECTURES`` uses.
VISION_RULES: dict[str, VisionRuleFactory] = {
    "qwen2_vl": QwenSmartResizeRule.from_configs,
    "qwen2_5_vl": QwenSmartResizeRule.from_configs,
    "qwen3_vl": QwenSmartResizeRule.from_configs,
    "alpamayo2_super": QwenSmartResizeRule.from_alpamayo2_super_configs,
    "cosmos3_edge": Glm4vSmartResizeRule.from_cosmos3_edge_configs,
    "llava": _llava_rule,
    "paligemma": FixedTokensRule.from_paligemma_configs,
    "aria": FixedTokensRule.from_aria_configs,
    "blip2": FixedTokensRule.from_blip2_configs,
    "openvla": FixedTokensRule.from_openvla_configs,
    "gemma3": Gemma3Rule.from_configs,
    "gemma3n": Gemma3Rule.from_gemma3n_configs,
    "gemma4": Gemma4Rule.from_configs,
    "gemma4_unified": Gemma4Rule.from_gemma4_unified_configs,
    "mistral3": PixtralRule.from_configs,
    "lightonocr": PixtralRule.from_lightonocr_configs,
    "glm4v": Glm4vSmartResizeRule.from_configs,
    "llava_next": AnyresRule.from_llava_next_configs,
    "llava_onevision": AnyresRule.from_llava_onevision_configs,
    "granite4_vision": AnyresRule.from_granite4_vision_configs,
    "internvl": InternVLRule.from_configs,
    "internvl_chat": InternVLChatRule.from_configs,
    "eagle2_5_vl": InternVLChatRule.from_eagle_configs,
    "qianfan_ocr": InternVLChatRule.from_qianfan_configs,
    "idefics3": SplitImageRule.from_configs,
    "smolvlm": SplitImageRule.from_configs,
    "llama4": Llama4Rule.from_configs,
    "paddleocr_vl": PaddleOCRVLRule.from_configs,
    "ovis2_5": Ovis2_5Rule.from_configs,
    "deepseek_ocr": DeepseekOCRRule.from_configs,
    "deepseek_ocr2": DeepseekOCRRule.from_ocr2_configs,
    "deepseek_vl2": DeepseekVL2Rule.from_configs,
    "minicpmv4_6": MiniCPMV4_6Rule.from_configs,
    "minicpmv4_7": MiniCPMV4_6Rule.from_minicpmv4_7_configs,
    "minicpmv": MiniCPMVRule.from_configs,
    "minicpmo": MiniCPMVRule.from_configs,
    "nvlm_d": NVLMRule.from_nvlm_configs,
    "nemotron_vl": NemotronVLRule.from_nemotron_configs,
    "nano_nemotron_vl": nano_nemotron_vl.from_configs,
    "h2ovl": H2OVLRule.from_h2ovl_configs,
    "kimi_k25": KimiK25Rule.from_configs,
    "kimi_vl": KimiVLRule.from_configs,
    "lfm2_vl": Lfm2VlRule.from_configs,
    "keye": KeyeRule.from_configs,
    "phi4mm": Phi4MMRule.from_configs,
    "phi3v": Phi3VRule.from_configs,
    "cohere2_vision": Cohere2VisionRule.from_configs,
    "molmo2": Molmo2Rule.from_configs,
    "molmo": MolmoRule.from_configs,
    "ernie45_vl": Ernie45VLRule.from_configs,
    "step3_vl": Step3VLRule.from_configs,
}

# The --mm-processor-kwargs knobs that reach each rule family's count (processor_kwargs); the
# pixel bounds reach the Qwen-style families through with_pixel_range instead.
PROCESSOR_KNOBS: dict[str, frozenset[str]] = {
    "gemma3": frozenset({"do_pan_and_scan"}),
    "cosmos3_edge": frozenset({"size"}),
    "gemma4": GEMMA4_KNOBS,
    "gemma4_unified": GEMMA4_KNOBS,
    "internvl_chat": INTERNVL_CHAT_KNOBS,
    "eagle2_5_vl": INTERNVL_CHAT_KNOBS,
    "qianfan_ocr": INTERNVL_CHAT_KNOBS,
    "nvlm_d": INTERNVL_CHAT_KNOBS,
    "nemotron_vl": NEMOTRON_VL_KNOBS,
    "nano_nemotron_vl": nano_nemotron_vl.PROCESSOR_KNOBS,
    "h2ovl": H2OVL_KNOBS,
    "internvl": frozenset({"min_patches", "max_patches"}),
    "deepseek_ocr": DEEPSEEK_OCR_KNOBS,
    "deepseek_ocr2": DEEPSEEK_OCR_KNOBS,
    "minicpmv4_6": MINICPMV4_6_KNOBS,
    "minicpmv4_7": MINICPMV4_6_KNOBS,
    "minicpmv": MINICPMV_KNOBS,
    "minicpmo": MINICPMV_KNOBS,
    "kimi_k25": KIMI_K25_KNOBS,  # priced as vLLM prices them: ignored
    "lfm2_vl": LFM2_VL_KNOBS,
    "phi4mm": PHI4MM_KNOBS,
    "phi3v": PHI3V_KNOBS,
    "cohere2_vision": COHERE2_VISION_KNOBS,
    "molmo2": MOLMO2_KNOBS,
    "ernie45_vl": ERNIE45_VL_KNOBS,
    "step3_vl": STEP3_VL_KNOBS,  # priced as vLLM prices them: ignored
}


# Families whose vLLM processor takes exactly their knobs and fails on any other kwarg; and
# Kimi-VL, Keye, Phi-4-multimodal, Phi-3-Vision, Molmo, ERNIE-4.5-VL and MiniCPM-V 2.6-4.5 /
# MiniCPM-o 2.6, whose remote processor (not run here) receives every kwarg: none is priced
# beyond the knobs the count reads (Phi-4-multimodal's dynamic_hd, Phi-3-Vision's num_crops,
# ERNIE-4.5-VL's image_min_pixels / image_max_pixels) or the remote processor's grid does
# (MiniCPM's).
KNOBS_ONLY = frozenset(
    {
        "internvl_chat",
        "eagle2_5_vl",
        "qianfan_ocr",
        "nvlm_d",
        "nano_nemotron_vl",
        "h2ovl",
        "kimi_vl",
        "keye",
        "phi4mm",
        "molmo",
        "ernie45_vl",
        "phi3v",
        "minicpmv",
        "minicpmo",
    }
)
# Families whose vLLM processor reads a knob under images_kwargs before the top level's
# (Cosmos 3 Edge: vLLM routes a flat size into images_kwargs unless that scope sets one).
SCOPED_FIRST = frozenset({"minicpmv4_6", "minicpmv4_7", "cosmos3_edge"})
# Families whose vLLM count ignores min_pixels / max_pixels (Cosmos 3 Edge's image processor
# takes neither: vLLM drops them at the top level and fails on them under images_kwargs).
NO_PIXEL_BOUNDS = frozenset({"cosmos3_edge"})
# Families whose vLLM count reads their knobs at the top level of the kwargs only (for
# Phi-4-multimodal, Phi-3-Vision and Molmo 2: the processor's attributes, set at load from
# those; for Cohere2Vision: get_number_of_image_patches over the merged kwargs' top level;
# MiniCPM-V 2.6-4.5 / MiniCPM-o 2.6: the remote image processor's attributes, set at load from
# those; vLLM hands images_kwargs to it as one unknown key, which it drops).
TOP_LEVEL_ONLY = frozenset(
    {"lfm2_vl", "phi4mm", "phi3v", "cohere2_vision", "molmo2", "ernie45_vl", "minicpmv", "minicpmo"}
)
# Families whose rule prices some of their architecture's checkpoints only: why it declines
# the others (None where it prices it). A declined checkpoint is priced by the engine under
# SIDECAR_PRICING auto / engine, and stops start-up otherwise, as an architecture without a
# rule does.
RULE_DECLINES: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "minicpmv": minicpmv_declines,
    "minicpmo": minicpmo_declines,
}


@dataclass(frozen=True, slots=True)
class ProfileOverrides:
    """Deployment settings that change the prediction, named after vLLM's flags."""

    min_pixels: int | None = None
    max_pixels: int | None = None
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)  # pixel bounds too
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    block_size_tokens: int | None = None  # None: vLLM's choice (kv_geometry.default_block_tokens)
    pipeline_parallel_size: int = 1
    pipeline_layer_partition: tuple[int, ...] = ()  # VLLM_PP_LAYER_PARTITION; (): default
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    prefix_caching: bool = True
    gdn_prefill_backend: str = "auto"

    @classmethod
    def from_settings(cls, settings: Settings) -> ProfileOverrides:
        """The deployment's flags as the sidecar's settings give them."""
        return cls(
            min_pixels=settings.min_pixels,
            max_pixels=settings.max_pixels,
            mm_processor_kwargs=settings.mm_processor_kwargs,
            kv_cache_dtype=settings.kv_cache_dtype,
            tensor_parallel_size=settings.tensor_parallel_size,
            # Unset: vLLM's own once the engine is read (serve.app.apply_engine_facts).
            block_size_tokens=settings.block_size_tokens,
            pipeline_parallel_size=settings.pipeline_parallel_size,
            pipeline_layer_partition=settings.pipeline_layer_partition,
            mamba_cache_dtype=settings.mamba_cache_dtype,
            mamba_ssm_cache_dtype=settings.mamba_ssm_cache_dtype,
            prefix_caching=settings.prefix_caching,
            gdn_prefill_backend=settings.gdn_prefill_backend,
        )


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the sidecar knows about the served model."""

    name: str
    model_type: str
    architecture: Architecture  # its entry in vLLM 0.33's registry, as the table holds it
    vision: VisionRule
    kv: KvGeometry
    max_position_embeddings: int
    validated_context_tokens: int | None
    embedding_width: int
    model_dtype_bytes: int
    parameter_count: int | None
    source: str  # "builtin" or the model directory
    video: VideoRule | None = None  # None: videos are priced at the per-item allowance

    def with_overrides(self, overrides: ProfileOverrides) -> ModelProfile:
        """Apply the deployment's vLLM flags."""
        kv_dtype_bytes = kv_cache_dtype_bytes(overrides.kv_cache_dtype, self.model_dtype_bytes)
        block_size_tokens = overrides.block_size_tokens
        if block_size_tokens is None:
            block_size_tokens = default_block_tokens(self.kv.layer_groups, kv_dtype_bytes)
        if overrides.tensor_parallel_size < 1 or block_size_tokens < 1:
            raise ConfigurationError("tensor_parallel_size and block_size must be at least 1")
        kv = replace(
            self.kv,
            dtype_bytes=kv_dtype_bytes,
            tensor_parallel_size=overrides.tensor_parallel_size,
            block_size_tokens=block_size_tokens,
            pipeline_parallel_size=overrides.pipeline_parallel_size,
            pipeline_layer_partition=overrides.pipeline_layer_partition,
            **_recurrent_state_flags(self.kv, overrides, self.model_dtype_bytes),
        )
        try:
            kv.stage_layers  # noqa: B018 - validates the pipeline split once, at start-up
        except ValueError as exc:
            raise ConfigurationError(f"model {self.name!r}: {exc}") from None
        return replace(
            self,
            vision=self.vision.with_pixel_range(overrides.min_pixels, overrides.max_pixels),
            video=None
            if self.video is None
            else self.video.with_pixel_range(overrides.min_pixels, overrides.max_pixels),
            kv=kv,
        )


def _recurrent_state_flags(
    kv: KvGeometry, overrides: ProfileOverrides, model_dtype_bytes: int
) -> dict[str, Any]:
    """The ``KvGeometry`` fields vLLM's recurrent-state flags set (module ``kv_geometry``)."""
    try:
        conv = overrides.mamba_cache_dtype
        ssm = overrides.mamba_ssm_cache_dtype
        conv_bytes = model_dtype_bytes if conv == "auto" else STATE_DTYPE_BYTES[conv]
        ssm_bytes = None if ssm == "auto" else STATE_DTYPE_BYTES[ssm]
    except KeyError as exc:
        raise ConfigurationError(f"unsupported Mamba cache dtype {exc}") from None
    gated_delta_net = any(
        g.state is not None and g.state.kind is RecurrentKind.GATED_DELTA_NET
        for g in kv.layer_groups
    )
    # FlashInfer's GDN prefill (vLLM's auto choice on Hopper) exports prefill checkpoints;
    # auto assumes it, the costlier layout, until vLLM's block size rules it out.
    checkpoints = gated_delta_net and overrides.gdn_prefill_backend in ("auto", "flashinfer")
    return {
        "conv_state_dtype_bytes": conv_bytes,
        "ssm_state_dtype_bytes": ssm_bytes,
        "prefix_caching": overrides.prefix_caching,
        "prefill_checkpoint_tokens": GDN_PREFILL_CHECKPOINT_TOKENS if checkpoints else None,
    }


def kv_cache_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> int:
    """Bytes per KV element for a ``--kv-cache-dtype`` value; ``auto`` is the model dtype."""
    if kv_cache_dtype == "auto":
        return model_dtype_bytes
    try:
        return _KV_CACHE_DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        supported = ", ".join(["auto", *_KV_CACHE_DTYPE_BYTES])
        raise ConfigurationError(
            f"unsupported KV cache dtype {kv_cache_dtype!r}; supported: {supported}"
        ) from None


def builtin_model_names() -> list[str]:
    """Hugging Face ids with built-in profiles."""
    return sorted(BUILTIN_MODELS)


def load_profile(
    model: str, overrides: ProfileOverrides | None = None, *, engine_only: bool = False
) -> ModelProfile:
    """Profile for a built-in id or a model directory; ConfigurationError if neither.
    ``engine_only``: a model directory whose family has no native rule gets
    ``EngineOnlyRule`` (its images priced by vLLM's count) instead of an error."""
    overrides = overrides or ProfileOverrides()
    kwargs = ProcessorKwargs.from_settings_values(
        overrides.mm_processor_kwargs,
        min_pixels=overrides.min_pixels,
        max_pixels=overrides.max_pixels,
    )
    overrides = replace(overrides, min_pixels=kwargs.min_pixels, max_pixels=kwargs.max_pixels)
    builtin = _find_builtin(model)
    if builtin is not None:
        entry = BUILTIN_MODELS[builtin]
        profile = profile_from_configs(
            builtin,
            entry.config,
            entry.preprocessor,
            source="builtin",
            video_preprocessor=entry.video_preprocessor,
            processor_kwargs=kwargs,
        )
        profile = replace(profile, parameter_count=entry.parameter_count)
    elif Path(model).is_dir():
        profile = _profile_from_directory(Path(model), kwargs, engine_only=engine_only)
    else:
        raise ConfigurationError(
            f"unknown model {model!r}: not a built-in profile and not a model directory. "
            f"Built-ins: {', '.join(builtin_model_names())}"
        )
    return profile.with_overrides(overrides)


def profile_from_configs(
    name: str,
    config: dict[str, Any],
    preprocessor: dict[str, Any],
    *,
    source: str,
    video_preprocessor: dict[str, Any] | None = None,
    processor_kwargs: ProcessorKwargs | None = None,
    engine_only: bool = False,
) -> ModelProfile:
    """Build a profile from parsed ``config.json`` and preprocessor config values.

    ``processor_kwargs`` are the server's ``--mm-processor-kwargs``: the family's knobs are
    merged over ``preprocessor`` as vLLM merges them, and kept as given under
    ``SERVER_KWARGS`` for rules whose processor reads them apart from its files.

    ``video_preprocessor`` None means the checkpoint has no video processor config, and, as
    transformers' ``BaseVideoProcessor.get_video_processor_dict`` does, the video processor is
    built from ``preprocessor`` (the image processor's values).
    """
    architecture = resolve_architecture(name, config, engine_pricing=engine_only)
    model_type = str(config.get("model_type", ""))
    factory: VisionRuleFactory
    if architecture.support is Support.NEEDS_ENGINE:
        rule, factory = architecture.name, _engine_only_rule
    else:
        rule = architecture.rule or ""
        factory = VISION_RULES[rule]
        config = architecture.model_config(config)
        declines = RULE_DECLINES.get(rule)
        declined = None if declines is None else declines(config)
        if declined is not None and not engine_only:
            raise ConfigurationError(
                f"model {name!r} is {architecture.name}, whose rule does not price it "
                f"({declined}): {ENGINE_PRICING_HINT}"
            )
        if declined is not None:
            architecture = replace(
                architecture, support=Support.NEEDS_ENGINE, rule=None, note=declined, proof=""
            )
            rule, factory = architecture.name, _engine_only_rule
    text = text_config(config)
    # Engine-priced: vLLM counts with its own kwargs, so the sidecar has no knob to price.
    knobs = (
        {}
        if architecture.support is Support.NEEDS_ENGINE
        else (processor_kwargs or ProcessorKwargs({})).for_family(
            name,
            rule,
            PROCESSOR_KNOBS.get(rule, frozenset()),
            knobs_only=rule in KNOBS_ONLY,
            scoped_first=rule in SCOPED_FIRST,
            top_level_only=rule in TOP_LEVEL_ONLY,
            pixel_bounds=rule not in NO_PIXEL_BOUNDS,
        )
    )
    if knobs:
        preprocessor = {**preprocessor, **knobs, SERVER_KWARGS: knobs}
    try:
        vision = PixelLimited(factory(rule, config, preprocessor))
        video = (
            None
            if architecture.video_rule is None
            else VIDEO_RULES[architecture.video_rule](
                architecture.video_rule,
                config,
                preprocessor if video_preprocessor is None else video_preprocessor,
            )
        )
        text_model = read_text_model(config, text)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"model {name!r}: config is missing or malformed: {exc}") from exc
    vision_config = config.get("vision_config") or {}
    return ModelProfile(
        name=name,
        model_type=model_type,
        architecture=architecture,
        vision=vision,
        kv=KvGeometry(
            layer_groups=text_model.layer_groups,
            dtype_bytes=text_model.dtype_bytes,
            layer_order=text_model.layer_order,
            conv_state_dtype_bytes=text_model.dtype_bytes,
        ),
        max_position_embeddings=text_model.max_position_embeddings,
        validated_context_tokens=validated_context_tokens(model_type, text),
        embedding_width=int(vision_config.get("out_hidden_size") or text_model.hidden_size),
        model_dtype_bytes=text_model.dtype_bytes,
        parameter_count=None,
        source=source,
        video=video,
    )


def _find_builtin(model: str) -> str | None:
    lowered = model.lower()
    for name in BUILTIN_MODELS:
        if name.lower() == lowered:
            return name
    return None


def _engine_only_rule(family: str, config: dict[str, Any], _: dict[str, Any]) -> VisionRule:
    """No native rule: vLLM prices every size; the context bounds one of unknown cost."""
    return EngineOnlyRule(
        family, read_text_model(config, text_config(config)).max_position_embeddings
    )


def _profile_from_directory(
    directory: Path, kwargs: ProcessorKwargs, *, engine_only: bool = False
) -> ModelProfile:
    config = _read_json(directory / "config.json")
    preprocessor: dict[str, Any] = {}
    for candidate in ("preprocessor_config.json", "processor_config.json"):
        path = directory / candidate
        if path.is_file():
            data = _read_json(path)
            # processor_config.json may nest the image processor's values.
            preprocessor = {**data.get("image_processor", {}), **data, **preprocessor}
    profile = profile_from_configs(
        str(directory),
        config,
        {**preprocessor, MODEL_DIRECTORY: str(directory)},
        source=str(directory),
        video_preprocessor=_video_preprocessor(directory, preprocessor),
        processor_kwargs=kwargs,
        engine_only=engine_only,
    )
    return replace(profile, parameter_count=_parameter_count(directory, profile))


def _video_preprocessor(directory: Path, preprocessor: dict[str, Any]) -> dict[str, Any] | None:
    """The video processor's values where transformers looks first: nested in
    ``processor_config.json``, then ``video_preprocessor_config.json``; None for neither."""
    nested = preprocessor.get("video_processor")
    if isinstance(nested, dict):
        return nested
    path = directory / "video_preprocessor_config.json"
    return _read_json(path) if path.is_file() else None


def _parameter_count(directory: Path, profile: ModelProfile) -> int | None:
    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        return None
    total_bytes = _read_json(index).get("metadata", {}).get("total_size")
    return int(total_bytes) // profile.model_dtype_bytes if total_bytes else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"model directory has no {path.name}: {path}") from None
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path} does not hold a JSON object")
    return data
