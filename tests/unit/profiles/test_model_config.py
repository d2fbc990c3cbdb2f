"""profiles.model_config: the text tower read from a shipped config.json, with transformers'
class defaults for the keys it leaves out (those defaults against transformers itself:
``tests/oracle/test_model_config_oracle.py``)."""

from __future__ import annotations

from sidecar.profiles import load_profile, profile_from_configs
from sidecar.profiles.builtins import BUILTIN_MODELS

GEMMA3_4B = "google/gemma-3-4b-it"


def test_a_sparse_shipped_gemma3_config_gets_transformers_class_defaults() -> None:
    # google/gemma-3-4b-it's config.json names only these text keys.
    shipped = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "torch_dtype": "bfloat16",
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "model_type": "gemma3_text",
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "vision_config": {"image_size": 896, "patch_size": 14},
    }
    preprocessor = BUILTIN_MODELS[GEMMA3_4B].preprocessor
    profile = profile_from_configs(GEMMA3_4B, shipped, preprocessor, source="test")
    assert profile.kv == load_profile(GEMMA3_4B).kv
    assert profile.max_position_embeddings == 131_072
