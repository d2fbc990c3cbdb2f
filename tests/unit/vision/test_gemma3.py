"""vision.gemma3: one rule for every Gemma 3 checkpoint, and no pan-and-scan.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle_families.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import load_profile, profile_from_configs
from sidecar.profiles.builtins import BUILTIN_MODELS
from tests.support.family_dirs import write_gemma3n_dir

GEMMA3 = "google/gemma-3-4b-it"
GEMMA3_BUILTINS = ["google/gemma-3-4b-it", "google/gemma-3-12b-it", "google/gemma-3-27b-it"]


def test_gemma3_checkpoints_share_one_rule_and_refuse_pan_and_scan() -> None:
    rules = {load_profile(name).vision for name in GEMMA3_BUILTINS}
    assert len(rules) == 1
    assert rules.pop().image_tokens(4032, 3024).prompt_tokens == 260
    entry = BUILTIN_MODELS[GEMMA3]
    with pytest.raises(ConfigurationError, match="pan-and-scan"):
        profile_from_configs(
            "g", entry.config, {**entry.preprocessor, "do_pan_and_scan": True}, source="t"
        )


def test_gemma3n_frames_its_256_soft_tokens_as_gemma_3_does(tmp_path: Path) -> None:
    rule = load_profile(str(write_gemma3n_dir(tmp_path))).vision
    assert [rule.image_tokens(*size).tokens for size in ((1, 1), (640, 480), (9000, 20))] == [
        260, 260, 260,
    ]  # fmt: skip
    assert rule.max_image_tokens().tokens == 260
