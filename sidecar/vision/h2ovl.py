"""H2OVL-Mississippi: InternVL chat's tiles, twice over for a lone image (multi-scale crops).

vLLM 0.33 serves ``H2OVLChatModel`` (``model_executor/models/h2ovl.py``) with
``H2OVLProcessor`` (``transformers_utils/processors/h2ovl.py``), an ``InternVLChatProcessor``
whose image processor takes one more argument, ``use_msac``. Without it, or when the request
holds more than one image (``_images_to_pixel_values_lst``: MSAC only for a single image), the
tiles are InternVL chat's. With it, a lone image is tiled twice, each pass with a thumbnail:
first over the grids of 1 to ``max_dynamic_patch`` tiles (grid ``c1 x r1``), then over those
of 3 to ``max_dynamic_patch`` whose columns divide ``c1`` by none and rows divide ``r1`` by
none; the two passes' tiles less one thumbnail: ``tiles = n1 + n2 - 1``. The placeholder is
``<img>`` + ``image_seq_length`` x tiles + ``</img>``, from the tiles the processor made.

The count thus depends on the number of images in the request, which the rule does not see.
The sidecar prices each image at the larger of the two tilings: exact for a lone image
whenever MSAC's is the larger (always with ``min_dynamic_patch`` 1 and the thumbnail on, the
shipped configuration: MSAC's first pass is then the plain tiling and the second adds at
least nothing), and never below vLLM's count for an image beside others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.vision.internvl_chat import PROCESSOR_KNOBS as INTERNVL_CHAT_KNOBS
from sidecar.vision.internvl_chat import Grid, InternVLChatRule, closest_grid, target_ratios

# H2OVLImageProcessor's arguments: InternVL chat's and use_msac, the only kwargs it accepts.
PROCESSOR_KNOBS = INTERNVL_CHAT_KNOBS | {"use_msac"}
MSAC_SECOND_PASS_MIN_TILES = 3  # image_to_pixel_values_h2ovl's second pass: min_num=3


def with_thumbnail(blocks: int) -> int:
    """A pass's tiles: MSAC's passes always add the thumbnail to more than one tile."""
    return blocks + 1 if blocks != 1 else blocks


def second_pass_ratios(first: Grid, most: int) -> list[Grid]:
    """``get_h2ovl_target_ratios(3, most, prior_aspect_ratio=first)``."""
    return [
        ratio
        for ratio in target_ratios(MSAC_SECOND_PASS_MIN_TILES, most)
        if first[0] % ratio[0] != 0 and first[1] % ratio[1] != 0
    ]


@dataclass(frozen=True, slots=True)
class H2OVLRule(InternVLChatRule):
    """InternVL chat's tiles, or MSAC's two passes where they cost more."""

    use_msac: bool = False

    @classmethod
    def from_h2ovl_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> H2OVLRule:
        """``H2OVLProcessingInfo``: InternVL chat's knobs (tiles of ``vision_config.image_size``)
        and ``use_msac``, from the server's kwargs or else ``config.json``."""
        tiler = InternVLChatRule.from_configs(family, config, preprocessor)
        use_msac = preprocessor.get("use_msac", config.get("use_msac"))
        if use_msac is None:
            raise ValueError("H2OVL config has no use_msac")
        return cls.over(tiler, use_msac=bool(use_msac))

    def msac_tiles(self, width_px: int, height_px: int) -> int:
        """``H2OVLProcessor.get_num_image_tokens`` with MSAC: ``n1 + n2 - 1``."""
        most = self.max_dynamic_patch
        first = closest_grid(width_px, height_px, target_ratios(1, most), self.image_size_px)
        second = closest_grid(
            width_px, height_px, second_pass_ratios(first, most), self.image_size_px
        )
        return with_thumbnail(first[0] * first[1]) + with_thumbnail(second[0] * second[1]) - 1

    def tiles(self, width_px: int, height_px: int) -> int:
        plain = InternVLChatRule.tiles(self, width_px, height_px)
        return max(plain, self.msac_tiles(width_px, height_px)) if self.use_msac else plain

    def tile_counts(self) -> frozenset[int]:
        plain = InternVLChatRule.tile_counts(self)
        if not self.use_msac:
            return plain
        # Every first-pass grid with the most its second pass can add: a bound, reached or not.
        most = self.max_dynamic_patch
        msac = {
            with_thumbnail(c * r)
            + max(
                (with_thumbnail(c2 * r2) for c2, r2 in second_pass_ratios((c, r), most)),
                default=1,
            )
            - 1
            for c, r in target_ratios(1, most)
        }
        return plain | frozenset(msac)

    def describe(self) -> str:
        msac = " (MSAC: two passes for a lone image)" if self.use_msac else ""
        return f"{InternVLChatRule.describe(self)}{msac}"
