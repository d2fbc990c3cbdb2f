"""profiles.model_config against transformers: the text-config defaults the sidecar assumes for
keys a shipped config.json leaves out are transformers' own class defaults."""

from __future__ import annotations

import pytest
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from sidecar.profiles.model_config import TEXT_CONFIG_DEFAULTS

pytestmark = pytest.mark.oracle


# Text model_types whose config class transformers registers under another name: Kimi-K2.5's
# remote schema names its DeepSeek-V3 text config kimi_k2.
CONFIG_CLASS_OF = {"kimi_k2": "deepseek_v3"}


def _is_full(layer_type: str) -> bool:
    return layer_type == "full_attention"


@pytest.mark.parametrize("model_type", sorted(TEXT_CONFIG_DEFAULTS))
def test_text_config_defaults_are_transformers_class_defaults(model_type: str) -> None:
    config = CONFIG_MAPPING[CONFIG_CLASS_OF.get(model_type, model_type)]()
    # to_dict, not attributes: a config with per-layer values (Gemma 4) refuses the global read.
    values = config.to_dict()
    for key, value in TEXT_CONFIG_DEFAULTS[model_type].items():
        if key == "full_attention_interval":
            # transformers spends it on layer_types as the config is built, and keeps those.
            expected = [
                "linear_attention" if (i + 1) % value else "full_attention"
                for i in range(config.num_hidden_layers)
            ]
            assert config.layer_types == expected, key
        elif key == "sliding_window_pattern":
            # Every value-th layer is full attention: kept as a private attribute, or (from
            # transformers 5.25 for Gemma 3n / 4) spent on layer_types.
            pattern = getattr(config, "_sliding_window_pattern", None)
            if pattern is None:
                full = [_is_full(kind) for kind in values["layer_types"]]
                assert full == [(i + 1) % value == 0 for i in range(len(full))], key
            else:
                assert pattern == value, key
        elif key == "global_head_dim" and key not in values:
            # transformers 5.25 holds it as the full-attention layers' own head_dim.
            layers = config.per_layer_config
            heads = {
                layers[i].head_dim for i, kind in enumerate(values["layer_types"]) if _is_full(kind)
            }
            assert heads == {value}, key
        else:
            assert values[key] == value, key
