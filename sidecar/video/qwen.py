"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL videos: vLLM's frame sampling, then the HF resize.

vLLM 0.33 picks the video loader from the processor class (``vllm/multimodal/video.py``):

* ``qwen2_vl`` (``Qwen2VLVideoBackend``, for ``Qwen2VLVideoProcessor``; Qwen2.5-VL has no
  video processor of its own): ``n = total / source_fps * fps`` with ``fps`` 2, clamped to
  ``[min_frames, floor(min(max_frames, total) / 2) * 2]`` and to ``total``, floored to a
  multiple of ``temporal_patch_size``; frames ``torch.arange(0, total, total / n)``, whose
  length is ``ceil(total / (total / n))`` in double precision: ``n + 1`` where that quotient
  lands just above ``n`` (75 frames at 10 fps: 15 frames, not 14). A source fps of 0 is
  refused; ``n`` of 0 (a 1-frame video) divides by zero.
* ``qwen3_vl`` (``Qwen3VLVideoBackend``): ``n = int(total / source_fps * fps)`` clamped to
  ``[min_frames, max_frames]`` and to ``total``; frames ``np.linspace(0, total - 1, n)``.

Defaults fps 2, frames [4, 768] are the loader's (``--media-io-kwargs`` can change them; the
sidecar does not model that). The HF video processor then resizes every frame alike and
pads the frame count to a multiple of ``temporal_patch_size`` (``patchify``):

* Qwen2/2.5-VL: ``smart_resize`` of one frame into ``size`` (``[shortest_edge,
  longest_edge]`` pixels), the image function;
* Qwen3-VL: its own ``smart_resize`` over the whole clip (``frames x h x w`` into the range),
  after enlarging a frame under one ``factor`` on a side (``clip_smart_resize``).

``cap_pixels_per_frame`` (off in transformers 5.20 and 5.24 unless a config sets it) lowers
the per-frame bound as qwen-vl-utils does. Tokens are ``grid_t x (h/patch) x (w/patch) / merge**2``.

Around them the prompt holds, for Qwen2/2.5-VL, the template's ``<|vision_start|>`` and
``<|vision_end|>``; for Qwen3-VL, per temporal group ``<{t:.1f} seconds>`` (tokenized alone),
``<|vision_start|>``, the group's tokens and ``<|vision_end|>``, in place of the template's
three placeholder tokens (``Qwen3VLMultiModalProcessor.get_video_repl``), ``t`` being the mean
of the group's two frame indices over the source fps (``_calculate_timestamps``). Without a
tokenizer each timestamp is priced at its character count, an upper bound for a byte-level
BPE on ASCII text (Qwen's tokenizer gives one token a digit, plus ``<``, ``.``, `` seconds``
and ``>``: 7 fewer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from sidecar.errors import UnsupportedImageSizeError, VideoError
from sidecar.video import TextTokenCounter, VideoTokens
from sidecar.video.probe import VideoHeader

# clip_smart_resize is re-exported: this module's public API before the arithmetic was shared.
from sidecar.vision.smart_resize import clip_smart_resize as clip_smart_resize
from sidecar.vision.smart_resize import smart_resize

QWEN_VIDEO_WRAPPER_TOKENS = 2  # <|vision_start|> and <|vision_end|>
# The chat template's <|vision_start|><|video_pad|><|vision_end|> for one video.
QWEN_VIDEO_PLACEHOLDER_TOKENS = 3
LOADER_FPS = 2.0
LOADER_MIN_FRAMES = 4
LOADER_MAX_FRAMES = 768

# transformers' class defaults, used where the video processor config leaves a key out.
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen2_vl": {  # Qwen2VLVideoProcessor
        "shortest_edge": 128 * 28 * 28,
        "longest_edge": 28 * 28 * 768,
        "patch_size": 14,
        "max_video_tokens": 128_000,
    },
    "qwen3_vl": {  # Qwen3VLVideoProcessor
        "shortest_edge": 128 * 32 * 32,
        "longest_edge": 32 * 32 * 768,
        "patch_size": 16,
        "max_video_tokens": 768,
    },
}
_LOADERS = {"qwen2_vl": "qwen2_vl", "qwen2_5_vl": "qwen2_vl", "qwen3_vl": "qwen3_vl"}


@dataclass(frozen=True, slots=True)
class QwenVideoRule:
    """vLLM's Qwen video loader plus the Hugging Face Qwen video processor, as arithmetic."""

    family: str
    loader: str  # "qwen2_vl" or "qwen3_vl": vLLM's video loader backend
    patch_size: int
    merge_size: int
    temporal_patch_size: int
    min_pixels: int  # the video processor's size["shortest_edge"]
    max_pixels: int  # size["longest_edge"]: per frame (Qwen2/2.5), per clip (Qwen3)
    cap_pixels_per_frame: bool = False
    max_video_tokens: int = 128_000
    fps: float = LOADER_FPS
    min_frames: int = LOADER_MIN_FRAMES
    max_frames: int = LOADER_MAX_FRAMES

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], video_preprocessor: dict[str, Any]
    ) -> QwenVideoRule:
        """Build from the video processor's config values (see
        ``profiles.profile_from_configs``)."""
        loader = _LOADERS[family]
        defaults = _CLASS_DEFAULTS[loader]
        size = video_preprocessor.get("size") or {}
        min_pixels = size.get("shortest_edge", defaults["shortest_edge"])
        max_pixels = size.get("longest_edge", defaults["longest_edge"])
        if loader == "qwen2_vl":  # Qwen2VLVideoProcessor.__init__ moves these into size
            min_pixels = video_preprocessor.get("min_pixels") or min_pixels
            max_pixels = video_preprocessor.get("max_pixels") or max_pixels
        return cls(
            family=family,
            loader=loader,
            patch_size=int(video_preprocessor.get("patch_size") or defaults["patch_size"]),
            merge_size=int(video_preprocessor.get("merge_size") or 2),
            temporal_patch_size=int(video_preprocessor.get("temporal_patch_size") or 2),
            min_pixels=int(min_pixels),
            max_pixels=int(max_pixels),
            cap_pixels_per_frame=bool(video_preprocessor.get("cap_pixels_per_frame")),
            max_video_tokens=int(
                video_preprocessor.get("max_video_tokens") or defaults["max_video_tokens"]
            ),
        )

    @property
    def factor(self) -> int:
        """Side length in pixels that one merged token covers."""
        return self.patch_size * self.merge_size

    def sampled_frames(self, frame_count: int, source_fps: float) -> int:
        """Frames the loader hands the processor; VideoError where vLLM's loader fails."""
        if frame_count <= 0 or source_fps <= 0:
            raise VideoError(
                f"the video reports {frame_count} frames at {source_fps:g} fps; "
                f"the {self.family} video loader needs a known frame count and frame rate"
            )
        if self.loader == "qwen3_vl":
            wanted = int(frame_count / source_fps * self.fps)
            return min(max(wanted, self.min_frames), self.max_frames, frame_count)
        step = self.temporal_patch_size
        max_frames = math.floor(min(self.max_frames, frame_count) / step) * step
        n = frame_count / source_fps * self.fps
        n = math.floor(min(max(n, self.min_frames), max_frames, frame_count) / step) * step
        if n <= 0:
            raise VideoError(
                f"the video has {frame_count} frame; the {self.family} video loader "
                f"samples frames in multiples of {step}"
            )
        # torch.arange's length, computed in double precision as PyTorch does.
        return math.ceil(frame_count / (frame_count / n))

    def frame_indices(self, frame_count: int, frames: int) -> list[int]:
        """Qwen3-VL's sampled indices: ``np.linspace(0, total - 1, n).round()`` in float64."""
        if frames == 1:
            return [0]
        step = (frame_count - 1) / (frames - 1)
        return [round(i * step) for i in range(frames - 1)] + [frame_count - 1]

    def resized_frame(self, width_px: int, height_px: int, frames: int) -> tuple[int, int]:
        """(width, height) of every frame after the processor's resize."""
        factor, step = self.factor, self.temporal_patch_size
        max_pixels = self.max_pixels
        try:
            if self.loader == "qwen3_vl":
                if self.cap_pixels_per_frame:
                    frame_cap = self.max_video_tokens * factor * factor
                    per_frame = max(
                        min(frame_cap, self.max_pixels // frames), int(self.min_pixels * 1.05)
                    )
                    max_pixels = per_frame * frames
                h, w = clip_smart_resize(
                    frames, height_px, width_px, temporal_factor=step, factor=factor,
                    min_pixels=self.min_pixels, max_pixels=max_pixels,
                )  # fmt: skip
                return w, h
            if self.cap_pixels_per_frame:
                total_pixels = int(self.max_video_tokens * factor * factor * 0.9)
                max_pixels = max(
                    min(max_pixels, total_pixels * step // frames), int(self.min_pixels * 1.05)
                )
            h, w = smart_resize(
                height_px, width_px, factor=factor, min_pixels=self.min_pixels,
                max_pixels=max_pixels,
            )  # fmt: skip
        except UnsupportedImageSizeError as exc:
            raise VideoError(exc.message.replace("image", "its frames", 1)) from None
        return w, h

    def video_tokens(
        self, header: VideoHeader, *, count_text_tokens: TextTokenCounter | None = None
    ) -> VideoTokens:
        frames = self.sampled_frames(header.frame_count, header.fps or 0.0)
        if frames < self.temporal_patch_size:  # Qwen3-VL's smart_resize refuses it
            raise VideoError(
                f"the video has {header.frame_count} frame; the {self.family} processor "
                f"needs at least {self.temporal_patch_size}"
            )
        width, height = self.resized_frame(header.width_px, header.height_px, frames)
        grid = (
            -(-frames // self.temporal_patch_size),
            height // self.patch_size,
            width // self.patch_size,
        )
        per_group = grid[1] * grid[2] // self.merge_size**2
        wrapper, exact = QWEN_VIDEO_WRAPPER_TOKENS, True
        if self.loader == "qwen3_vl":
            stamps = self.timestamps(header.frame_count, header.fps or 0.0, frames)
            texts = [f"<{t:.1f} seconds>" for t in stamps]
            counter = count_text_tokens or len
            wrapper = QWEN_VIDEO_WRAPPER_TOKENS * grid[0] + sum(counter(t) for t in texts)
            exact = count_text_tokens is not None
        return VideoTokens(
            tokens=grid[0] * per_group,
            wrapper_tokens=wrapper,
            frames_sampled=frames,
            grid=grid,
            timestamp_tokens_exact=exact,
        )

    def timestamps(self, frame_count: int, source_fps: float, frames: int) -> list[float]:
        """Seconds printed before each temporal group (vLLM's ``_calculate_timestamps``)."""
        indices = self.frame_indices(frame_count, frames)
        group = self.merge_size  # vLLM pairs frames by the processor's merge_size
        if len(indices) % group:
            indices += [indices[-1]] * (group - len(indices) % group)
        seconds = [index / source_fps for index in indices]
        return [(seconds[i] + seconds[i + group - 1]) / 2 for i in range(0, len(seconds), group)]

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> QwenVideoRule:
        # Qwen2VLVideoProcessor takes min_pixels/max_pixels as kwargs; Qwen3VLVideoProcessor's
        # kwargs have no such keys, so transformers routes them to the image processor only.
        if self.loader != "qwen2_vl":
            return self
        return replace(
            self,
            min_pixels=self.min_pixels if min_pixels is None else min_pixels,
            max_pixels=self.max_pixels if max_pixels is None else max_pixels,
        )

    def describe(self) -> str:
        scope = "per clip" if self.loader == "qwen3_vl" else "per frame"
        return (
            f"{self.fps:g} fps, {self.min_frames}-{self.max_frames} frames "
            f"({self.loader} loader); smart_resize to multiples of {self.factor} px within "
            f"[{self.min_pixels:,}, {self.max_pixels:,}] px {scope}; tokens = "
            f"ceil(frames/{self.temporal_patch_size}) x h*w/{self.factor**2}"
        )
