"""video.qwen: Qwen2/2.5-VL and Qwen3-VL frame sampling, resize and tokens, from the rule alone.

Thousands of videos against transformers' own sampling and resize, and vLLM's timestamps:
``tests/oracle/test_video_oracle.py``.
"""

from __future__ import annotations

import pytest

from sidecar.errors import VideoError
from sidecar.video.probe import probe_video_bytes
from sidecar.video.qwen import QwenVideoRule
from tests.support.videos import CLASS_DEFAULT_RULES, QWEN3_RULE, QWEN25_RULE, make_video


def test_qwen2_arange_can_hand_the_processor_one_frame_more_than_n() -> None:
    """A 75-frame clip at 10 fps: n = 14, but ``torch.arange(0, 75,
    75 / 14)`` has 15 elements (75 / (75 / 14) is 14.000000000000002), so the processor gets
    15 frames and pads them to 16: 8 temporal groups, not 7."""
    header = probe_video_bytes(make_video(32, 32, 75, 10))
    assert QWEN25_RULE.sampled_frames(header.frame_count, header.fps or 0.0) == 15
    assert QWEN25_RULE.video_tokens(header).grid[0] == 8


def test_rule_reproduces_the_briefs_8464_tokens_for_32_frames_at_640x640() -> None:
    header = probe_video_bytes(make_video(640, 640, 32, 2))
    for rule in (QWEN25_RULE, CLASS_DEFAULT_RULES["qwen2_5_vl-class-defaults"]):
        cost = rule.video_tokens(header)
        assert cost.frames_sampled == 32
        assert cost.grid == (16, 46, 46)  # 644 / 14 = 46 patches a side
        assert cost.tokens == 16 * 529 == 8_464
        assert cost.wrapper_tokens == 2


@pytest.mark.parametrize("rule", [QWEN25_RULE, QWEN3_RULE], ids=["qwen2_5_vl", "qwen3_vl"])
def test_rule_refuses_a_video_without_frame_count_or_rate(rule: QwenVideoRule) -> None:
    with pytest.raises(VideoError, match="needs a known frame count and frame rate"):
        rule.sampled_frames(0, 30.0)
    with pytest.raises(VideoError, match="needs a known frame count and frame rate"):
        rule.sampled_frames(30, 0.0)


def test_qwen3_timestamps_pair_the_last_frame_with_itself_for_an_odd_count() -> None:
    assert QWEN3_RULE.timestamps(5, 1.0, 5) == [0.5, 2.5, 4.0]


def test_qwen25_builtin_reads_video_bounds_from_its_image_preprocessor_config() -> None:
    """Qwen2/2.5-VL checkpoints ship no video processor config, and transformers builds the
    video processor from ``preprocessor_config.json``: its min/max_pixels become the size."""
    assert (QWEN25_RULE.min_pixels, QWEN25_RULE.max_pixels) == (3136, 12_845_056)
    assert (QWEN25_RULE.patch_size, QWEN25_RULE.loader) == (14, "qwen2_vl")
    assert "per frame" in QWEN25_RULE.describe()


def test_qwen3_builtin_reads_its_video_preprocessor_config() -> None:
    assert (QWEN3_RULE.min_pixels, QWEN3_RULE.max_pixels) == (4096, 25_165_824)
    assert (QWEN3_RULE.patch_size, QWEN3_RULE.loader, QWEN3_RULE.factor) == (16, "qwen3_vl", 32)
    assert "per clip" in QWEN3_RULE.describe()
