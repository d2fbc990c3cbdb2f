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

The one thing stood in for is the model instance: the attention layers' backend
(FlashAttention, vLLM's choice for these head sizes on Hopper) and, for the Gated DeltaNet
layers, whether they export prefill checkpoints (``checkpoint_alignment``, FlashInfer's
GDN prefill on Hopper: 64), which vLLM reads off the built layers.
"""

from __future__ import annotations

import contextlib
import json
import sys
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch
from transformers import Gemma3TextConfig, NemotronHConfig, Qwen2Config
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig
from vllm.distributed.utils import get_pp_indices
from vllm.model_executor.layers.mamba import abstract as mamba_abstract
from vllm.model_executor.models.config import (
    MambaModelConfig,
    NemotronHForCausalLMConfig,
    Qwen3_5ForConditionalGenerationConfig,
)
from vllm.model_executor.models.nemotron_h import NemotronHForCausalLM
from vllm.model_executor.models.qwen3_5 import (
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeForConditionalGeneration,
)
from vllm.platforms.interface import Platform
from vllm.utils.math_utils import cdiv
from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
from vllm.v1.core import kv_cache_planning
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, SlidingWindowSpec
from vllm.v1.kv_cache_layout import KVCacheLayout

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
    "qwen2": (Qwen2Config, None, None),
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
    return list(hf.layer_types)


def run(case: dict[str, Any]) -> dict[str, Any]:
    text = dict(case["text_config"])
    config_cls, model_cls, config_hook = FAMILIES[text["model_type"]]
    hf = config_cls(**{k: v for k, v in text.items() if k != "model_type"})
    model_dtype = STR_DTYPE_TO_TORCH_DTYPE[case.get("model_dtype", "bfloat16")]
    tp = case.get("tensor_parallel_size", 1)
    cache_dtype = case.get("kv_cache_dtype", "auto")
    cache_config = SimpleNamespace(
        block_size=case.get("block_size", 16),
        user_specified_block_size=False,
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
        get_resolved_kv_cache_layout=lambda: KVCacheLayout.LHBNC,
    )
    model_config = SimpleNamespace(
        hf_config=hf,
        hf_text_config=hf,
        dtype=model_dtype,
        max_model_len=case.get("max_model_len", 32768),
        architecture=case.get("architecture", "Model"),
        use_mla=False,
        is_hybrid=model_cls is not None,
        get_num_kv_heads=lambda parallel: max(1, hf.num_key_value_heads // tp),
        get_head_size=lambda: hf.head_dim,
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
    attention = {
        "num_kv_heads": max(1, hf.num_key_value_heads // tp),
        "head_size": hf.head_dim,
        "dtype": kv_dtype,
        "block_size": cache_config.block_size,
    }
    specs: dict[str, Any] = {}
    for index, kind in enumerate(kinds):
        name = f"model.layers.{index}"
        if kind in ("linear_attention", "mamba"):
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
            specs[name] = SlidingWindowSpec(**attention, sliding_window=hf.sliding_window)
        elif kind in ("full_attention", "attention"):
            specs[name] = FullAttentionSpec(**attention)
    groups = kv_cache_planning.get_kv_cache_groups(vllm_config, specs)
    layout = cache_config.get_resolved_kv_cache_layout()
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
    }


def main() -> None:
    with contextlib.redirect_stdout(sys.stderr):  # vLLM logs; the answer goes to stdout
        results = [run(case) for case in json.load(sys.stdin)]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
