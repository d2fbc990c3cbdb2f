"""vision.pixtral: Pixtral and Mistral Small 3.1, whose merge size may come from config.json.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle_families.py``.
"""

from __future__ import annotations

from sidecar.profiles import load_profile, profile_from_configs
from sidecar.profiles.builtins import BUILTIN_MODELS

MISTRAL_SMALL = "mistralai/Mistral-Small-3.1-24B-Instruct-2503"


def test_mistral_small_reads_spatial_merge_from_config_when_the_processor_file_omits_it() -> None:
    entry = BUILTIN_MODELS[MISTRAL_SMALL]
    preprocessor = {k: v for k, v in entry.preprocessor.items() if k != "spatial_merge_size"}
    rule = profile_from_configs("m", entry.config, preprocessor, source="test").vision
    assert rule == load_profile(MISTRAL_SMALL).vision
    assert rule.image_tokens(1540, 1540).tokens == 55 * 56
