"""video (the package): what one video costs in the prompt."""

from __future__ import annotations

from sidecar.video import VideoTokens


def test_video_tokens_in_the_prompt_are_the_placeholders_and_their_wrappers() -> None:
    tokens = VideoTokens(tokens=780, wrapper_tokens=2 + 5 * 6, frames_sampled=10, grid=(5, 26, 24))
    assert tokens.prompt_tokens == 780 + 32
    assert tokens.timestamp_tokens_exact


def test_video_tokens_at_the_allowance_hold_no_grid() -> None:
    allowance = VideoTokens(16_384, 0, 0, (0, 0, 0), timestamp_tokens_exact=False)
    assert allowance.prompt_tokens == 16_384
