"""engine.calibration: which pricing is in force, the bound before a count is known, readiness
under SIDECAR_RULE_MISMATCH, and the memo kept across restarts (SIDECAR_ENGINE_MEMO_PATH).

The self-check against a running engine: ``tests/e2e/test_ask_the_engine.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.cost.engine_prices import EngineCount
from sidecar.engine.calibration import EngineCalibration
from sidecar.errors import ConfigurationError
from sidecar.observe.log import get_logger
from sidecar.profiles import load_profile
from sidecar.settings import Settings
from tests.support.sidecars import QWEN

PROFILE = load_profile(QWEN)
CONTEXT_TOKENS = 32_768


def calibration(**settings: Any) -> EngineCalibration:
    return EngineCalibration(
        Settings.model_validate({"model": QWEN, **settings}),
        PROFILE,
        model=QWEN,
        logger=get_logger(),
        context_tokens=lambda: CONTEXT_TOKENS,
    )


@pytest.mark.parametrize(
    ("pricing", "active"), [("auto", False), ("rule", False), ("engine", True)]
)
def test_pricing_in_force_for_a_family_with_a_rule(pricing: str, active: bool) -> None:
    state = calibration(pricing=pricing)
    assert state.prices.active is active
    assert state.prices.upper_bound == PROFILE.vision.max_image_tokens()


def test_rule_pricing_cannot_switch_to_the_engine_on_a_mismatch() -> None:
    with pytest.raises(ConfigurationError, match="SIDECAR_RULE_MISMATCH=engine"):
        calibration(pricing="rule", rule_mismatch="engine")


def test_refuse_holds_readiness_until_a_check_passes_in_enforce_mode_only() -> None:
    assert calibration(rule_mismatch="refuse").holds_readiness == "the rule check has not run yet"
    assert calibration(rule_mismatch="refuse", mode="shadow").holds_readiness is None
    assert calibration(rule_mismatch="refuse", engine_poll_seconds=0).holds_readiness is None
    assert calibration().holds_readiness is None  # warn


def test_the_memo_is_kept_across_restarts_for_the_same_model_and_pixels(tmp_path: Path) -> None:
    path = str(tmp_path / "memo.json")
    first = calibration(engine_memo_path=path, max_pixels=1_003_520)
    first.prices.remember(
        [
            ((640, 480, None, None), EngineCount(393)),
            ((9000, 28, None, None), EngineCount(None, "no")),
        ]
    )
    first.save_memo()
    again = calibration(engine_memo_path=path, max_pixels=1_003_520)
    assert again.load_memo() == 2
    assert again.prices.known(640, 480) == EngineCount(393)
    assert again.prices.known(9000, 28) == EngineCount(None, "no")
    other_pixels = calibration(engine_memo_path=path, max_pixels=2_007_040)
    assert other_pixels.load_memo() == 0  # counted under another pixel cap: not reused


def test_an_unreadable_memo_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "memo.json"
    path.write_text("{not json")
    assert calibration(engine_memo_path=str(path)).load_memo() == 0
