"""MiniCPM-V 4.6 and 4.7: a source image plus up to ``max_slice_nums`` slices of ~448² px.

vLLM 0.33 counts these images itself (``minicpmv4_6.py``
``MiniCPMV4_6ProcessingInfo._compute_visual_tokens`` and ``get_slice_image_placeholder``),
with transformers' ``MiniCPMV4_6ImageProcessor`` geometry:

* ``get_sliced_grid``: ``multiple = min(ceil(w x h / scale_resolution²), max_slice_nums)``;
  none for ``multiple <= 1``, else the rows x columns of ``multiple - 1 .. multiple + 1``
  slices (never one, never over the maximum) whose log aspect ratio is closest to the
  image's, ties to more rows.
* ``find_best_resize``: above ``scale_resolution²`` px (or always, ``allow_upscale``) the
  image is rescaled to about ``scale_resolution²`` px with ``int()`` truncation, then each
  side rounded to a multiple of ``patch_size x 4`` (two 2 x 2 merges), at least one.
  The source image takes it with ``allow_upscale`` only when there are no slices; each
  slice is the refined size (``get_refine_size``: the image rounded to the grid, one cell
  resized with ``allow_upscale``).
* each part costs ``h x w / (patch_size² x 16)`` tokens (``downsample_mode`` ``"4x"``:
  ``/ 4``, any other value 16).

The markup is ``<image_id>N</image_id><image>`` + source + ``</image>``, then per slice
``<slice>`` + tokens + ``</slice>``, rows joined by a newline: 5 + source + slices x
(2 + per slice) + (rows - 1) for the first ten images. ``N`` is the image's place in the
request, spelled one token per digit by the Qwen tokenizer, so image 10 onwards costs one
more per extra digit: ``image_index_tokens``. vLLM always writes the id (its image path never
passes ``use_image_id``), and counts slices whatever ``slice_mode`` says while the image
processor honours it, which the engine then fails on: the sidecar refuses that knob.

The costliest image is not vLLM's profiling size (448 x 4,032): a thin image keeps its long
side when rescaled, so one part of a 1 px wide image runs to about ``scale x sqrt(height)``
px, and a 1 x 100,000 image costs thousands of tokens. ``max_part_tokens`` bounds every part of a
decodable image; since that is past any context, ``max_image_tokens`` is the smaller of the
image bound and the text model's context, which no image vLLM accepts can exceed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.settings import VLLM_MAX_IMAGE_PIXELS
from sidecar.vision import SERVER_KWARGS, ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale

Grid = tuple[int, int]  # (rows, columns), as transformers orders them
MERGE_FACTOR = 4  # sides are multiples of patch_size x 4: two successive 2 x 2 merges
ID_TAG_TOKENS = 2  # <image_id> and </image_id>
FIRST_ID_DIGITS = 1  # the id of the first ten images, "0" to "9": one token
FRAME_TOKENS = 2  # <image> and </image>; <slice> and </slice> around each slice
# The --mm-processor-kwargs vLLM's count reads (top level or under images_kwargs).
# use_image_id reaches the image processor only, which ignores it: vLLM's markup always
# carries the id. slice_mode and patch_size are refused: vLLM's count ignores the first
# while the processor honours it, and the second no longer matches the vision tower.
PROCESSOR_KNOBS = frozenset(
    {"max_slice_nums", "downsample_mode", "scale_resolution", "use_image_id"}
)
DEFAULT_MAX_SLICE_NUMS = 9  # MiniCPMV4_6ImageProcessor's and vLLM's default
DEFAULT_SCALE_RESOLUTION_PX = 448
DEFAULT_PATCH_SIZE_PX = 14


def ensure_divide(length: float, divisor: int) -> int:
    """transformers' ``ensure_divide``: rounded to a multiple, at least one."""
    return max(round(length / divisor) * divisor, divisor)


def sliced_grid(
    height_px: int,
    width_px: int,
    max_slice_nums: int,
    scale_px: int,
    *,
    first_on_tie: bool = False,
) -> Grid | None:
    """``get_sliced_grid``, float for float: ``MiniCPMV4_6ImageProcessor``'s by default (rows
    ascending, ties to more rows); with ``first_on_tie`` the older checkpoints' remote
    ``image_processing_minicpmv.py`` (columns ascending, the first grid of least error kept)."""
    log_ratio = math.log(width_px / height_px)
    ratio = width_px * height_px / (scale_px * scale_px)
    multiple = min(math.ceil(ratio), max_slice_nums)
    if multiple <= 1:
        return None
    best = (1, 1)
    min_error = float("inf")
    for num_slices in (multiple - 1, multiple, multiple + 1):
        if num_slices == 1 or num_slices > max_slice_nums:
            continue
        for factor in range(1, num_slices + 1):
            if num_slices % factor:
                continue
            rows = num_slices // factor if first_on_tie else factor
            columns = num_slices // rows
            error = abs(log_ratio - math.log(columns / rows))
            if error < min_error:
                best, min_error = (rows, columns), error
            elif not first_on_tie and error == min_error and rows > best[0]:
                best = (rows, columns)
    return best


def image_id_extra_tokens(index: int) -> int:
    """What the image's place in the request (0-based) adds over the first image's: the extra
    digits of its ``<image_id>``, one token each (Qwen's tokenizer spells digits singly)."""
    return len(str(index)) - 1


def best_resize(
    height_px: float, width_px: float, scale_px: int, unit_px: int, *, allow_upscale: bool
) -> tuple[int, int]:
    """``find_best_resize``: (height, width), sides multiples of ``unit_px``."""
    if height_px * width_px > scale_px * scale_px or allow_upscale:
        aspect_ratio = width_px / height_px
        height_px = int(scale_px / math.sqrt(aspect_ratio))
        width_px = int(height_px * aspect_ratio)
    return ensure_divide(height_px, unit_px), ensure_divide(width_px, unit_px)


def slice_count_candidates(
    width_px: int, height_px: int, scale_resolution_px: int, max_slice_nums: int
) -> list[Size]:
    """Downscale candidates for MiniCPM-V's slicing: the image scaled to just under each slice
    count's area (where the count steps), and down a ladder of scales."""
    area = width_px * height_px
    scales = {0.97**step for step in range(1, 200)}
    budget = scale_resolution_px**2
    for slices in range(1, max(1, max_slice_nums) + 1):
        if slices * budget < area:
            scales.add(math.sqrt(slices * budget / area))
    return [
        (max(1, math.floor(width_px * s)), max(1, math.floor(height_px * s)))
        for s in sorted(scales)
    ]


@dataclass(frozen=True, slots=True)
class MiniCPMV4_6Rule(TiledDownscale):
    """``5 + source + slices x (2 + per slice) + rows - 1`` for the first ten images."""

    family: str
    scale_resolution_px: int
    patch_size_px: int
    max_slice_nums: int
    token_divisor: int  # patches per token: 16 (two 2 x 2 merges) or 4 ("4x")
    context_tokens: int  # the text model's max_position_embeddings: bounds an accepted image
    wrapper_tokens: int = 0  # the template's <|image_pad|> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> MiniCPMV4_6Rule:
        """MiniCPM-V 4.6: with no ``max_slice_nums`` knob, the image processor's own."""
        return cls._build(family, config, preprocessor, preprocessor.get("max_slice_nums"))

    @classmethod
    def from_minicpmv4_7_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> MiniCPMV4_6Rule:
        """MiniCPM-V 4.7: with no knob, vLLM's prompt reads ``max_slice_nums`` from
        ``config.json`` (``slice_config``, then the top level, else 9), not the processor's
        file (``MiniCPMV4_7ProcessingInfo.get_image_max_slice_num``)."""
        knob = (preprocessor.get(SERVER_KWARGS) or {}).get("max_slice_nums")
        if knob is None:
            slice_config = config.get("slice_config")
            if isinstance(slice_config, dict):
                knob = slice_config.get("max_slice_nums", DEFAULT_MAX_SLICE_NUMS)
            else:
                knob = config.get("max_slice_nums", DEFAULT_MAX_SLICE_NUMS)
        return cls._build(family, config, preprocessor, knob)

    @classmethod
    def _build(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any], max_slice_nums: Any
    ) -> MiniCPMV4_6Rule:
        # The knobs come merged over the processor's file, as vLLM merges them.
        downsample_mode = preprocessor.get("downsample_mode") or "16x"
        text = config.get("text_config") or config
        context = text.get("max_position_embeddings") or config.get("max_position_embeddings")
        if not context:
            raise ValueError("MiniCPM-V config has no max_position_embeddings")
        return cls(
            family,
            int(preprocessor.get("scale_resolution") or DEFAULT_SCALE_RESOLUTION_PX),
            int(preprocessor.get("patch_size") or DEFAULT_PATCH_SIZE_PX),
            int(DEFAULT_MAX_SLICE_NUMS if max_slice_nums is None else max_slice_nums),
            4 if downsample_mode == "4x" else 16,
            int(context),
        )

    @property
    def unit_px(self) -> int:
        return self.patch_size_px * MERGE_FACTOR

    def _part_tokens(self, height_px: int, width_px: int) -> int:
        return height_px * width_px // (self.patch_size_px**2 * self.token_divisor)

    def parts(self, width_px: int, height_px: int) -> tuple[Grid | None, int, int]:
        """``_compute_visual_tokens``: the grid, the source image's tokens, each slice's."""
        scale, unit = self.scale_resolution_px, self.unit_px
        grid = sliced_grid(height_px, width_px, self.max_slice_nums, scale)
        source = best_resize(height_px, width_px, scale, unit, allow_upscale=grid is None)
        if grid is None:
            return None, self._part_tokens(*source), 0
        rows, columns = grid
        # get_refine_size: the image rounded to the grid, one cell resized with upscaling.
        cell = best_resize(
            ensure_divide(height_px, rows) / rows,
            ensure_divide(width_px, columns) / columns,
            scale,
            unit,
            allow_upscale=True,
        )
        return grid, self._part_tokens(*source), self._part_tokens(*cell)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        grid, source, per_slice = self.parts(width_px, height_px)
        tokens = ID_TAG_TOKENS + FIRST_ID_DIGITS + FRAME_TOKENS + source
        if grid is not None and per_slice > 0:
            rows, columns = grid
            tokens += rows * columns * (FRAME_TOKENS + per_slice) + rows - 1
        return ImageTokens(tokens=tokens, wrapper_tokens=self.wrapper_tokens)

    @staticmethod
    def image_index_tokens(index: int) -> int:
        """The extra digits of the image's ``<image_id>`` (``image_id_extra_tokens``)."""
        return image_id_extra_tokens(index)

    def max_part_tokens(self) -> int:
        """Tokens no part (the source image or one slice) of a decodable image exceeds.

        ``find_best_resize`` takes ``h0 = int(scale / sqrt(w / h))`` and ``w0 = int(h0 x w / h)``.
        Where ``w0 >= 1``, ``h0 x w0 <= scale²``, so the pair is bounded by the loop below
        (symmetric in the two sides). Where ``w0 = 0`` (a tall, thin part) the width is one
        unit and ``h0 <= scale x sqrt(h)``, with ``h`` at most vLLM's decode limit in pixels.
        A sliced image is over ``scale²`` px, so its source is rescaled the same way.
        """
        scale, unit = self.scale_resolution_px, self.unit_px
        most = ensure_divide(math.floor(scale * math.sqrt(VLLM_MAX_IMAGE_PIXELS)), unit) * unit
        for h0 in range(1, scale + 1):
            most = max(most, ensure_divide(h0, unit) * ensure_divide(scale * scale // h0, unit))
        return self._part_tokens(most, 1)

    def max_image_tokens(self) -> ImageTokens:
        # The bound above is far past any context (a 1 px wide image keeps its height), and
        # an image over the context is one vLLM refuses: the context bounds what is accepted.
        part = self.max_part_tokens()
        slices = max(0, self.max_slice_nums)
        tokens = ID_TAG_TOKENS + FIRST_ID_DIGITS + FRAME_TOKENS + part
        if slices > 1:
            tokens += slices * (FRAME_TOKENS + part) + slices - 1
        return ImageTokens(
            tokens=min(tokens, self.context_tokens), wrapper_tokens=self.wrapper_tokens
        )

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image scaled to just under each slice count's area, and down a ladder of
        scales: every candidate is priced by the exact rule before one is kept."""
        return slice_count_candidates(
            width_px, height_px, self.scale_resolution_px, self.max_slice_nums
        )

    def describe(self) -> str:
        return (
            f"a source image and up to {self.max_slice_nums} slices of about "
            f"{self.scale_resolution_px}² px, sides multiples of {self.unit_px} px, "
            f"1 token per {self.token_divisor} patches of {self.patch_size_px} px, with "
            f"<image_id>/<image>/<slice> markup; up to {self.max_image_tokens().tokens:,}"
        )
