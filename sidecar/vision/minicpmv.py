"""MiniCPM-V 2.6 / 4.0 / 4.5 and MiniCPM-o 2.6: a source image plus up to ``max_slice_nums``
slices, each a fixed ``image_feature_size`` (64) tokens.

vLLM 0.33 (``minicpmv.py``, ``MiniCPMVMultiModalProcessor._get_prompt_updates``) replaces
each image with the text of ``get_slice_image_placeholder(size, image_idx=N,
use_image_id=True)``, encoded by the tokenizer (MiniCPM-o's ``MiniCPMOProcessingInfo``
inherits the image path). For versions 2.6, 4.0 and 4.5 that text
comes from the checkpoint's remote image processor (``image_processing_minicpmv.py``), built
with the server's kwargs set on it:

* ``get_sliced_grid`` over ``max_slice_nums`` and ``scale_resolution``: 4.6's arithmetic
  (``minicpmv4_6.sliced_grid``) but columns ascending, the first grid of least error kept;
* ``<image_id>N</image_id>`` (vLLM passes ``use_image_id=True`` whatever the processor says),
  ``<image>`` + ``image_feature_size`` ``<unk>`` + ``</image>``, then, with ``slice_mode``,
  ``<slice>`` + ``image_feature_size`` ``<unk>`` + ``</slice>`` per slice, rows joined by a
  newline: ``5 + F + slices x (2 + F) + rows - 1`` for the first ten images. Image 10 onwards
  costs one more per extra digit of ``N`` (``image_index_tokens``, as for 4.6).

The resampler makes exactly ``F`` embeddings of any part, whatever its size, so no size is
refused below vLLM's decode limit; the most an image costs is ``max_slice_nums`` slices in one
column (``max_slice_nums - 1`` newlines). Versions 2.0 and 2.5 go through the older remote
processor's API, and MiniCPM-o 4.5 has its own: ``minicpmv_declines`` /
``minicpmo_declines`` name them, and they stay priced by the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.minicpmv4_6 import (
    FIRST_ID_DIGITS,
    FRAME_TOKENS,
    ID_TAG_TOKENS,
    Grid,
    image_id_extra_tokens,
    slice_count_candidates,
    sliced_grid,
)
from sidecar.vision.tiling import Size, TiledDownscale

# The --mm-processor-kwargs vLLM hands the remote image processor (set on it at load, top level
# only) that the sidecar prices: the two the grid reads, and use_image_id, which vLLM's prompt
# overrides. Any other reaches that processor too (slice_mode, image_feature_size, patch_size,
# the markup strings): refused, as the remote code is not run here.
PROCESSOR_KNOBS = frozenset({"max_slice_nums", "scale_resolution", "use_image_id"})
DEFAULT_MAX_SLICE_NUMS = 9  # the remote image processor's defaults, where its file has none
DEFAULT_SCALE_RESOLUTION_PX = 448
DEFAULT_IMAGE_FEATURE_SIZE = 64
# The config.json versions whose prompt vLLM builds with the 2.6-style remote image processor.
MINICPMV_VERSIONS = frozenset({(2, 6), (4, 0), (4, 5)})
MINICPMO_VERSIONS = frozenset({(2, 6)})


def config_version(config: Mapping[str, Any]) -> tuple[int, ...] | None:
    """``get_version_by_config``'s version from ``config.json``'s ``version``; None where it
    has none (vLLM then takes 2.0 or 2.5)."""
    version = config.get("version")
    if version is None:
        return None
    try:
        return tuple(int(part) for part in str(version).split("."))
    except ValueError:
        return ()


def _declines(config: Mapping[str, Any], versions: frozenset[tuple[int, ...]]) -> str | None:
    version = config_version(config)
    if version in versions:
        return None
    named = "no version (vLLM takes 2.0 or 2.5)" if version is None else f"version {version}"
    priced = ", ".join(".".join(map(str, v)) for v in sorted(versions))
    return f"config.json gives {named}; the MiniCPM-V rule prices {priced} only"


def minicpmv_declines(config: Mapping[str, Any]) -> str | None:
    """Why the rule does not price this ``MiniCPMV`` checkpoint, or None where it does."""
    return _declines(config, MINICPMV_VERSIONS)


def minicpmo_declines(config: Mapping[str, Any]) -> str | None:
    """Why the rule does not price this ``MiniCPMO`` checkpoint (4.5's image processor is not
    proven here), or None where it does."""
    return _declines(config, MINICPMO_VERSIONS)


@dataclass(frozen=True, slots=True)
class MiniCPMVRule(TiledDownscale):
    """``5 + F + slices x (2 + F) + rows - 1`` for the first ten images."""

    family: str
    scale_resolution_px: int
    max_slice_nums: int
    image_feature_size: int  # F: the resampler's queries, the tokens of every part
    wrapper_tokens: int = 0  # the template's (<image>./</image>) is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> MiniCPMVRule:
        """The remote image processor's values (the server's knobs merged over its file, as
        vLLM sets them on it); ``slice_mode`` off or a changed ``image_feature_size`` in the
        file is not priced."""
        del config  # the version is checked by minicpmv_declines; the count reads the file
        if preprocessor.get("slice_mode", True) is not True:
            raise ValueError("slice_mode other than true in preprocessor_config.json")
        max_slice_nums = int(preprocessor.get("max_slice_nums", DEFAULT_MAX_SLICE_NUMS))
        if max_slice_nums < 1:
            raise ValueError(f"max_slice_nums must be at least 1, not {max_slice_nums}")
        scale = int(preprocessor.get("scale_resolution", DEFAULT_SCALE_RESOLUTION_PX))
        if scale < 1:
            raise ValueError(f"scale_resolution must be at least 1, not {scale}")
        features = int(preprocessor.get("image_feature_size") or DEFAULT_IMAGE_FEATURE_SIZE)
        return cls(family, scale, max_slice_nums, features)

    def grid(self, width_px: int, height_px: int) -> Grid | None:
        """(rows, columns) of slices, None for the source image alone."""
        return sliced_grid(
            height_px, width_px, self.max_slice_nums, self.scale_resolution_px, first_on_tie=True
        )

    def _tokens(self, grid: Grid | None) -> int:
        part = self.image_feature_size
        tokens = ID_TAG_TOKENS + FIRST_ID_DIGITS + FRAME_TOKENS + part
        if grid is not None:
            rows, columns = grid
            tokens += rows * columns * (FRAME_TOKENS + part) + rows - 1
        return tokens

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=self._tokens(self.grid(width_px, height_px)),
            wrapper_tokens=self.wrapper_tokens,
        )

    @staticmethod
    def image_index_tokens(index: int) -> int:
        """The extra digits of the image's ``<image_id>`` (``image_id_extra_tokens``)."""
        return image_id_extra_tokens(index)

    def max_image_tokens(self) -> ImageTokens:
        # The most slices, all in one column (a tall image): the most newlines too.
        slices = self.max_slice_nums
        grid = (slices, 1) if slices > 1 else None
        return ImageTokens(tokens=self._tokens(grid), wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image scaled to just under each slice count's area (the count steps there),
        and down a ladder of scales: every candidate is priced before one is kept."""
        return slice_count_candidates(
            width_px, height_px, self.scale_resolution_px, self.max_slice_nums
        )

    def describe(self) -> str:
        return (
            f"a source image and up to {self.max_slice_nums} slices of about "
            f"{self.scale_resolution_px}² px, {self.image_feature_size} tokens each, with "
            f"<image_id>/<image>/<slice> markup; up to {self.max_image_tokens().tokens:,}"
        )
