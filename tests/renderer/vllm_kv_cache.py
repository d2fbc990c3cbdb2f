"""vLLM 0.33's own KV-cache layout for model configs, computed without a GPU.

Run by ``.tools/vllm-render/bin/python`` (tests/renderer/test_kv_geometry.py), not by
pytest: it reads a JSON list of cases on stdin and writes one result per case on stdout.
Each case is a text config (as ``config.json`` holds it), the deployment's flags and a
list of sequence lengths. Everything below is vLLM's code path with the GPU parts left
out: transformers' config class reads the layer kinds, the model class shapes the
recurrent state (``get_mamba_state_shape_from_config``), ``MambaModelConfig`` and the
model's ``verify_and_update_config`` pick the cache mode and SSM dtype,
``Platform._align_hybrid_block_size`` raises the block size (FlashAttention's kernel block
sizes), the layers' ``KVCacheSpec``s are grouped by ``get_kv_cache_groups`` and costed by
``_get_kv_cache_bytes_per_block`` and each spec's ``max_memory_usage_bytes``.

A case's ``vlm`` names the multimodal config class that nests the text config (Kimi-VL,
Kimi-K2.5, DeepSeek-VL2's ``language_config``, LFM2-VL), built with vLLM's or transformers'
own class so the text config is the one vLLM reads. MLA layers (``ModelConfig.use_mla``,
from ``is_deepseek_mla``) report ``MLAAttention.get_kv_cache_spec``; LFM2's ``conv`` layers
are ``MambaSpec``s shaped by ``Lfm2VLForConditionalGeneration``.

The one thing stood in for is the model instance: the attention layers' backend
(FlashAttention, vLLM's choice for these head sizes on Hopper; for MLA, FlashAttention MLA,
or FlashMLA where the cache dtype is one FlashAttention MLA does not take, as vLLM's Hopper
priority list picks them) and, for the Gated DeltaNet layers, whether they export prefill
checkpoints (``checkpoint_alignment``, FlashInfer's GDN prefill on Hopper: 64), which vLLM
reads off the built layers.
"""

from __future__ import annotations

import contextlib
import json
import sys
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch
import vllm.config  # noqa: F401 - imported first: the arch convertor's import is circular
from transformers import (
    Gemma3nTextConfig,
    Gemma3TextConfig,
    Gemma4TextConfig,
    Lfm2Config,
    Lfm2VlConfig,
    NemotronHConfig,
    Qwen2Config,
)
from transformers.models.kimi_k25.configuration_kimi_k25 import Kimi_K25Config
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig
from vllm.config.model import ModelConfig
from vllm.distributed.utils import get_pp_indices
from vllm.model_executor.layers.attention.mla_attention import MLAAttention
from vllm.model_executor.layers.mamba import abstract as mamba_abstract
from vllm.model_executor.models.config import (
    HybridAttentionMambaModelConfig,
    MambaModelConfig,
    NemotronHForCausalLMConfig,
    Qwen3_5ForConditionalGenerationConfig,
)
from vllm.model_executor.models.lfm2_vl import Lfm2VLForConditionalGeneration
from vllm.model_executor.models.nemotron_h import NemotronHForCausalLM
from vllm.model_executor.models.qwen3_5 import (
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeForConditionalGeneration,
)
from vllm.platforms.interface import Platform
from vllm.transformers_utils.configs.deepseek_vl2 import DeepseekVLV2Config
from vllm.transformers_utils.configs.kimi_vl import KimiVLConfig
from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase
from vllm.utils.math_utils import cdiv
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
from vllm.v1.attention.backends import fa_utils
from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
from vllm.v1.attention.backends.utils import (
    get_supported_kv_cache_layouts,
    resolve_kv_cache_layout,
)
from vllm.v1.core import kv_cache_planning
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, SlidingWindowSpec
from vllm.v1.kv_cache_layout import KVCacheLayout

# FlashAttention MLA's module imports FlashAttention's CUDA kernels by name; on CPU they are
# absent, and only the backend's class attributes (its cache dtypes and block sizes) are read.
for _kernel in ("flash_attn_varlen_func", "get_scheduler_metadata"):
    if not hasattr(fa_utils, _kernel):
        setattr(fa_utils, _kernel, None)
from vllm.v1.attention.backends.mla.flashattn_mla import FlashAttnMLABackend  # noqa: E402
from vllm.v1.attention.backends.mla.flashmla import FlashMLABackend  # noqa: E402

# model_type of the text config -> (transformers config class, vLLM model class, config hook)
FAMILIES: dict[str, tuple[Any, Any, Any]] = {
    "qwen3_5_text": (
        Qwen3_5TextConfig,
        Qwen3_5ForConditionalGeneration,
        Qwen3_5ForConditionalGenerationConfig,
    ),
    "qwen3_5_moe_text": (
        Qwen3_5MoeTextConfig,
        Qwen3_5MoeForConditionalGeneration,
        Qwen3_5ForConditionalGenerationConfig,
    ),
    "nemotron_h": (NemotronHConfig, NemotronHForCausalLM, NemotronHForCausalLMConfig),
    "gemma3_text": (Gemma3TextConfig, None, None),
    "gemma4_text": (Gemma4TextConfig, None, None),
    "gemma3n_text": (Gemma3nTextConfig, None, None),
    "qwen2": (Qwen2Config, None, None),
    # vLLM applies HybridAttentionMambaModelConfig to a hybrid without a hook of its own.
    "lfm2": (Lfm2Config, Lfm2VLForConditionalGeneration, HybridAttentionMambaModelConfig),
}

# The multimodal config classes that nest a text config, and the key they read it from.
VLMS: dict[str, tuple[Any, str]] = {
    "kimi_vl": (KimiVLConfig, "text_config"),  # vLLM's: DeepseekV2Config(**text_config)
    "kimi_k25": (Kimi_K25Config, "text_config"),  # transformers': kimi_k2 read as deepseek_v3
    "deepseek_vl_v2": (DeepseekVLV2Config, "language_config"),  # DeepseekVLV2TextConfig
    "lfm2_vl": (Lfm2VlConfig, "text_config"),
}


class HopperLike(Platform):
    """The platform base class, with the model's attention layers on FlashAttention."""

    @classmethod
    def _find_non_ssm_backends(cls, vllm_config: Any) -> list[Any]:
        return [FlashAttentionBackend]


def layer_kinds(hf: Any) -> list[str]:
    """Each decoder layer's kind as the vLLM model class reads the config."""
    if hasattr(hf, "layers_block_type"):  # NemotronH: M (mamba), * (attention), -, E
        return list(hf.layers_block_type)
    if getattr(hf, "layer_types", None) is None:  # DeepSeek-V2 / V3: every layer attends
        return ["full_attention"] * hf.num_hidden_layers
    return list(hf.layer_types)


def layer_config(hf: Any, index: int) -> Any:
    """Layer ``index``'s config: transformers' ``per_layer_config`` view where the layers differ
    (Gemma 4's global layers), which ``Gemma4DecoderLayer`` reads its head_dim and KV heads
    from; else the model's."""
    if getattr(hf, "is_heterogeneous", False):
        return hf.per_layer_config[index]
    return hf


def kv_shared(hf: Any, index: int) -> bool:
    """Whether layer ``index`` reads an earlier layer's KV (``Gemma4Attention`` /
    ``Gemma3nAttention``: the last ``num_kv_shared_layers`` layers get a
    ``kv_sharing_target_layer_name``), so the model runner gives it no ``KVCacheSpec``."""
    shared = getattr(hf, "num_kv_shared_layers", 0) or 0
    return shared > 0 and index >= hf.num_hidden_layers - shared


def uses_mha(hf: Any) -> bool:
    """``DeepseekV2DecoderLayer``: plain multi-head attention where both qk dims are 0."""
    return hf.model_type == "deepseek" or all(
        getattr(hf, dim, 0) == 0 for dim in ("qk_nope_head_dim", "qk_rope_head_dim")
    )


def text_and_outer_config(case: dict[str, Any]) -> tuple[Any, Any]:
    """The text config as vLLM reads it, and the config that holds it."""
    text = dict(case["text_config"])
    if "vlm" in case:
        vlm_cls, key = VLMS[case["vlm"]]
        outer = vlm_cls(**{key: text})
        return outer.text_config, outer
    config_cls = FAMILIES[text["model_type"]][0]
    hf = config_cls(**{k: v for k, v in text.items() if k != "model_type"})
    return hf, hf


def run(case: dict[str, Any]) -> dict[str, Any]:
    hf, outer = text_and_outer_config(case)
    _, model_cls, config_hook = FAMILIES.get(hf.model_type, (None, None, None))
    model_dtype = STR_DTYPE_TO_TORCH_DTYPE[case.get("model_dtype", "bfloat16")]
    tp = case.get("tensor_parallel_size", 1)
    cache_dtype = case.get("kv_cache_dtype", "auto")
    cache_config = SimpleNamespace(
        block_size=case.get("block_size", 16),
        user_specified_block_size="block_size" in case,
        cache_dtype=cache_dtype,
        mamba_cache_dtype=case.get("mamba_cache_dtype", "auto"),
        mamba_ssm_cache_dtype=case.get("mamba_ssm_cache_dtype", "auto"),
        mamba_cache_mode="none",
        mamba_block_size=None,
        mamba_page_size_padded=None,
        enable_prefix_caching=case.get("prefix_caching", True),
        kv_cache_dtype_skip_layers=None,
        num_gpu_blocks_override=None,
        use_replayssm=False,
        prefix_cache_retention_interval=None,
        kv_cache_layout=None,
    )
    cache_config.get_resolved_kv_cache_layout = lambda: KVCacheLayout[cache_config.kv_cache_layout]
    convertor = ModelArchConfigConvertorBase(outer, hf)
    # ModelConfig.use_mla, vLLM's own property, over the facts it reads.
    use_mla = ModelConfig.use_mla.fget(  # type: ignore[attr-defined]
        SimpleNamespace(
            hf_text_config=hf,
            is_deepseek_mla=convertor.is_deepseek_mla(),
            using_transformers_backend=lambda: False,
        )
    )
    latent = use_mla and not uses_mha(hf)

    def head_size_of(layer: Any) -> int:
        return getattr(layer, "head_dim", None) or layer.hidden_size // layer.num_attention_heads

    head_size = head_size_of(layer_config(hf, 0))
    model_config = SimpleNamespace(
        hf_config=outer,
        hf_text_config=hf,
        dtype=model_dtype,
        max_model_len=case.get("max_model_len", 32768),
        architecture=case.get("architecture", "Model"),
        use_mla=use_mla,
        is_hybrid=model_cls is not None,
        get_num_kv_heads=lambda parallel: (
            1 if use_mla else max(1, layer_config(hf, 0).num_key_value_heads // tp)
        ),
        get_head_size=lambda: convertor.get_head_size() if use_mla else head_size,
    )
    vllm_config = SimpleNamespace(
        model_config=model_config,
        cache_config=cache_config,
        parallel_config=SimpleNamespace(tensor_parallel_size=tp, decode_context_parallel_size=1),
        scheduler_config=SimpleNamespace(
            enable_chunked_prefill=True, disable_hybrid_kv_cache_manager=False
        ),
        attention_config=SimpleNamespace(hisparse_config=None),
        speculative_config=None,
        num_speculative_tokens=0,
        # A sliding window's cap is its steady state plus the tokens in flight in the step:
        # 0 here, the request's own share (kv_geometry prices the steady state).
        max_in_flight_tokens=0,
        additional_config={},
        kv_transfer_config=None,
    )
    if latent and not cache_config.user_specified_block_size:
        # Hopper's MLA priority list: FlashAttention MLA, then FlashMLA for a cache dtype
        # FlashAttention MLA does not take; the block size is the chosen backend's.
        backend = (
            FlashAttnMLABackend
            if cache_dtype in FlashAttnMLABackend.supported_kv_cache_dtypes
            else FlashMLABackend
        )
        cache_config.block_size = Platform._preferred_block_size_for_backends(
            [backend], cache_config.block_size, vllm_config
        )
    kinds = layer_kinds(hf)
    checkpoints = case.get("checkpoint_alignment")
    mamba_shapes: tuple[Any, ...] = ()
    mamba_dtypes: tuple[Any, ...] = ()
    if model_cls is not None:
        MambaModelConfig.verify_and_update_config(vllm_config)
        config_hook.verify_and_update_config(vllm_config)
        alignment = checkpoints if cache_config.mamba_cache_mode == "align" else None
        with (
            mock.patch(
                "vllm.model_executor.models.ModelRegistry.resolve_model_cls",
                return_value=(model_cls, model_config.architecture),
            ),
            mock.patch.object(
                mamba_abstract, "get_mamba_prefill_checkpoint_alignment", return_value=alignment
            ),
        ):
            HopperLike._align_hybrid_block_size(vllm_config, FlashAttentionBackend)
        mamba_shapes = model_cls.get_mamba_state_shape_from_config(vllm_config)
        mamba_dtypes = model_cls.get_mamba_state_dtype_from_config(vllm_config)
    kv_dtype = model_dtype if cache_dtype == "auto" else STR_DTYPE_TO_TORCH_DTYPE[cache_dtype]

    def attention(index: int) -> dict[str, Any]:
        layer = layer_config(hf, index)
        return {
            "num_kv_heads": max(1, layer.num_key_value_heads // tp),
            "head_size": head_size_of(layer),
            "dtype": kv_dtype,
            "block_size": cache_config.block_size,
        }

    # The MLA layer as MLAAttention.__init__ sets it up: the latent plus the RoPE key.
    mla_layer = SimpleNamespace(
        kv_cache_dtype=cache_dtype,
        head_size=(getattr(hf, "kv_lora_rank", 0) or 0) + getattr(hf, "qk_rope_head_dim", 0),
        sliding_window=None,
        topk_buffer_width=None,
        indexer=None,
        non_causal_multi_token_decode=False,
    )
    specs: dict[str, Any] = {}
    for index, kind in enumerate(kinds):
        name = f"model.layers.{index}"
        if kv_shared(hf, index):
            continue
        if kind in ("full_attention", "attention") and latent:
            specs[name] = MLAAttention.get_kv_cache_spec(mla_layer, vllm_config)
        elif kind in ("linear_attention", "mamba", "conv"):
            align = cache_config.mamba_cache_mode == "align" and checkpoints is not None
            specs[name] = MambaSpec(
                shapes=mamba_shapes,
                dtypes=mamba_dtypes,
                block_size=cache_config.mamba_block_size,
                page_size_padded=cache_config.mamba_page_size_padded,
                mamba_cache_mode=cache_config.mamba_cache_mode,
                num_prefill_checkpoint_blocks=1 if align else 0,
                prefill_checkpoint_alignment=checkpoints if align else None,
            )
        elif kind == "sliding_attention":
            specs[name] = SlidingWindowSpec(**attention(index), sliding_window=hf.sliding_window)
        elif kind in ("full_attention", "attention"):
            specs[name] = FullAttentionSpec(**attention(index))
    # The engine core's layout: FlashAttention declares none, so vLLM's default preference,
    # narrowed to block-compact layouts where the layers' head shapes differ.
    layout = resolve_kv_cache_layout(
        vllm_config,
        [[layout.name for layout in get_supported_kv_cache_layouts([FlashAttentionBackend])]],
        specs.values(),
    )
    groups = kv_cache_planning.get_kv_cache_groups(vllm_config, specs)
    # Pipeline parallelism: the global groups projected onto each stage's decoder layers
    # (get_pp_indices); a block costs the most on the busiest stage.
    stages = case.get("pipeline_parallel_size", 1)
    bytes_per_block = max(
        kv_cache_planning._get_kv_cache_bytes_per_block(
            kv_cache_planning._project_kv_cache_groups_to_worker(
                groups,
                {
                    name: spec
                    for name, spec in specs.items()
                    if start <= int(name.rsplit(".", 1)[1]) < end
                },
            ),
            layout,
        )
        for start, end in (get_pp_indices(len(kinds), rank, stages) for rank in range(stages))
    )
    available = case.get("available_bytes", 40 * 2**30)
    # Every stage gets the busiest stage's count; one stage is vLLM's own config.
    num_blocks = (
        kv_cache_planning.get_kv_cache_config_from_groups(vllm_config, groups, available).num_blocks
        if stages == 1
        else available // bytes_per_block
    )
    held: list[tuple[str, list[int]]] = []
    group_block_sizes = [group.kv_cache_spec.block_size for group in groups]
    for group in groups:
        spec = group.kv_cache_spec
        blocks = []
        for tokens in case.get("sequence_tokens", []):
            model_config.max_model_len = tokens
            blocks.append(cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes))
        held.append((type(spec).__name__, blocks))
    return {
        "block_size": cache_config.block_size,
        "mamba_cache_mode": cache_config.mamba_cache_mode,
        "bytes_per_block": bytes_per_block,
        "num_blocks": num_blocks,
        "groups": held,
        "group_block_sizes": group_block_sizes,
        "kv_cache_layout": layout.name,
    }


def main() -> None:
    with contextlib.redirect_stdout(sys.stderr):  # vLLM logs; the answer goes to stdout
        results = [run(case) for case in json.load(sys.stdin)]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
