"""Videos: how many prompt positions one video costs, from its container's metadata alone.

The stages, in flow order:

1. ``probe``: the container's metadata as vLLM's default video loader (OpenCV's FFmpeg
   backend) reports it: frame size after the display rotation, frame rate, frame count,
   duration. Read with PyAV from a data URI's bytes, or from a bounded prefix of a URL;
   no sampled frame is decoded.
2. ``isobmff``: the two facts PyAV does not expose and MP4/MOV boxes hold: the display
   rotation (``tkhd``/``mvhd`` matrices), and whether the index (``moov``) lies within reach of
   a prefix.
3. ``qwen``: the frame sampling of vLLM's Qwen video loaders and the Hugging Face video
   processors' resize, as arithmetic over the probed metadata.

A video rule is pure arithmetic, like the image rules in ``sidecar.vision``; families without
one are priced with ``SIDECAR_VIDEO_TOKENS_PER_ITEM`` per video.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sidecar.video.probe import VideoHeader

TextTokenCounter = Callable[[str], int]  # tokens of a text, as the model's tokenizer encodes it


@dataclass(frozen=True, slots=True)
class VideoTokens:
    """What one video costs in the language model's prompt.

    ``tokens`` are the video placeholder positions (``<|video_pad|>``) the processor emits;
    ``wrapper_tokens`` are the other positions its expansion holds: vision start and end
    markers, and for Qwen3-VL the ``<t seconds>`` text before each temporal group.
    ``grid`` is the processor's ``video_grid_thw``: (temporal groups, patch rows, patch
    columns); (0, 0, 0) for a video priced at the allowance.
    """

    tokens: int
    wrapper_tokens: int
    frames_sampled: int
    grid: tuple[int, int, int]
    timestamp_tokens_exact: bool = True  # False: counted with the conservative estimate

    @property
    def prompt_tokens(self) -> int:
        """Prompt positions the video occupies, wrappers included."""
        return self.tokens + self.wrapper_tokens


class VideoRule(Protocol):
    """The token arithmetic of one model family's video loader and processor."""

    @property
    def family(self) -> str:
        """Short family name, for tables and logs."""
        ...

    def video_tokens(
        self, header: VideoHeader, *, count_text_tokens: TextTokenCounter | None = None
    ) -> VideoTokens:
        """Tokens for a video with this metadata; raises VideoError when the processor refuses.

        ``count_text_tokens`` counts text the expansion inserts (Qwen3-VL's timestamps)
        exactly; without it a conservative estimate is used.
        """
        ...

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> VideoRule:
        """The same rule with vLLM's ``--mm-processor-kwargs`` pixel bounds, where the
        family's video processor takes them."""
        ...

    def describe(self) -> str:
        """One line for tables and the docs: the sampling and resize parameters."""
        ...
