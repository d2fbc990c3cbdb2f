"""``smart_resize``: the resize arithmetic of Qwen2/2.5/3-VL and GLM-4.1V, in one place.

transformers keeps one copy of this function per model; they differ only in what they scale:

* ``smart_resize``: one image (Qwen2/2.5-VL images and videos, per frame, and Qwen3-VL
  images);
* ``clip_smart_resize``: ``frames x height x width`` against the pixel bounds, after enlarging
  a side under one ``factor`` (Qwen3-VL videos, and GLM-4.1V images priced as
  ``temporal_patch_size`` frames).

Both round each side to a multiple of ``factor`` with Python's ``round`` (banker's rounding),
then rescale into ``[min_pixels, max_pixels]`` keeping the aspect ratio. The one-image form is
the clip form for one frame, temporal factor 1 and no enlargement: every product and quotient
below is then the same number, so ``scale_into_range`` serves both, in transformers'
floating-point order (a one-token difference is a wrong prediction).
"""

from __future__ import annotations

import math

from sidecar.errors import UnsupportedImageSizeError

MAX_ASPECT_RATIO = 200  # longer side over shorter side above this: the processor refuses


def smart_resize(
    height_px: int, width_px: int, *, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """transformers' Qwen2-VL ``smart_resize``: the (height, width) the processor feeds the ViT."""
    refuse_extreme_aspect(height_px, width_px, width_px=width_px, height_px=height_px)
    return scale_into_range(
        1, height_px, width_px, temporal_factor=1, factor=factor,
        min_pixels=min_pixels, max_pixels=max_pixels,
    )  # fmt: skip


def clip_smart_resize(
    num_frames: int,
    height_px: int,
    width_px: int,
    *,
    temporal_factor: int,
    factor: int,
    min_pixels: int,
    max_pixels: int,
) -> tuple[int, int]:
    """transformers' Qwen3-VL video (and GLM-4.1V) ``smart_resize``: (height, width) of a clip."""
    height, width = height_px, width_px
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    refuse_extreme_aspect(height, width, width_px=width_px, height_px=height_px)
    return scale_into_range(
        num_frames, height, width, temporal_factor=temporal_factor, factor=factor,
        min_pixels=min_pixels, max_pixels=max_pixels,
    )  # fmt: skip


def refuse_extreme_aspect(height: int, width: int, *, width_px: int, height_px: int) -> None:
    """Raise as the processor does when ``height x width`` exceeds the aspect-ratio limit.

    ``width_px`` and ``height_px`` are the caller's original size, for the message.
    """
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        ratio = max(height, width) / min(height, width)
        raise UnsupportedImageSizeError(
            f"image {width_px}x{height_px} has an aspect ratio of {ratio:.1f}; "
            f"the model's processor refuses ratios above {MAX_ASPECT_RATIO}"
        )


def scale_into_range(
    num_frames: int,
    height: int,
    width: int,
    *,
    temporal_factor: int,
    factor: int,
    min_pixels: int,
    max_pixels: int,
    keep_one_factor: bool = True,
) -> tuple[int, int]:
    """The common tail of every ``smart_resize``: round to ``factor``, then fit the bounds.
    ``keep_one_factor``: a side shrunk under ``max_pixels`` stays at least ``factor``, as
    transformers' versions do; vLLM's own copies (PaddleOCR-VL, Ovis 2.5) let it reach 0."""
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        floor = factor if keep_one_factor else 0
        h_bar = max(floor, math.floor(height / beta / factor) * factor)
        w_bar = max(floor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
