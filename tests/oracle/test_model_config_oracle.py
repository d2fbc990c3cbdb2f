"""profiles.model_config against transformers: the text-config defaults the sidecar assumes for
keys a shipped config.json leaves out are transformers' own class defaults."""

from __future__ import annotations

import pytest
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from sidecar.profiles.model_config import TEXT_CONFIG_DEFAULTS

pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("model_type", sorted(TEXT_CONFIG_DEFAULTS))
def test_text_config_defaults_are_transformers_class_defaults(model_type: str) -> None:
    config = CONFIG_MAPPING[model_type]()
    for key, value in TEXT_CONFIG_DEFAULTS[model_type].items():
        if key == "full_attention_interval":
            # transformers spends it on layer_types as the config is built, and keeps those.
            expected = [
                "linear_attention" if (i + 1) % value else "full_attention"
                for i in range(config.num_hidden_layers)
            ]
            assert config.layer_types == expected, key
            continue
        attribute = "_sliding_window_pattern" if key == "sliding_window_pattern" else key
        assert getattr(config, attribute) == value, key
