"""InternVL in its original chat format (``InternVLChatModel``) and the models built on it.

vLLM 0.33 serves these checkpoints with its own processor
(``transformers_utils/processors/internvl.py``, adapted from InternVL2's
``modeling_internvl_chat.py``), not the -hf ``InternVLProcessor``: the image is resized onto the
grid of ``image_size`` px tiles, ``min_dynamic_patch..max_dynamic_patch`` of them, whose aspect
ratio is closest to the image's (favouring more tiles on a tie while the image's area exceeds
half of the grid's), plus a thumbnail tile when there is more than one and ``use_thumbnail``
is set; ``dynamic_image_size`` false means one tile. Each tile costs
``image_seq_length = (image_size // patch_size)**2 * downsample_ratio**2`` ``<IMG_CONTEXT>``
tokens, and ``<img>``/``</img>`` wrap them: ``tokens = 2 + image_seq_length * tiles``. The
template's ``<image>`` is replaced by that run.

The grid list is built as vLLM builds it (a set sorted by tile count, whose order decides the
tie rule between grids of equal count), and the grid search is its ``find_closest_aspect_ratio``
float for float.

The knobs are ``InternVLChatImageProcessor``'s arguments, from ``--mm-processor-kwargs`` or
else ``config.json``; vLLM passes every server kwarg to that constructor, so any other key
(a pixel bound, ``do_rescale``) makes vLLM fail: the sidecar refuses it at start-up.

Built on the same processor, with the same count: Eagle 2.5 (the tile side is
``force_image_size`` when set), Skywork-R1V and Qianfan-OCR (transformers' config class, whose
vision sizes may be pairs). The relatives that change one piece subclass
this rule and override that piece: NVLM-D the replacement's length per tile count
(``nvlm_d``: ``tokens_for_tiles``), Llama-Nemotron-Nano-VL the grid choice (``nemotron_vl``:
``grid``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Self

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale

Grid = tuple[int, int]  # (columns, rows)
BOUNDARY_TOKENS = 2  # <img> and </img>
# InternVLChatImageProcessor's arguments: the only kwargs vLLM's processor accepts.
PROCESSOR_KNOBS = frozenset(
    {"image_size", "min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size", "use_thumbnail"}
)

# transformers' QianfanOCRConfig / QianfanOCRVisionConfig defaults.
QIANFAN_IMAGE_SIZE_PX = 448
QIANFAN_DOWNSAMPLE_RATIO = 0.5


def target_ratios(min_num: int, max_num: int) -> list[Grid]:
    """``get_internvl_target_ratios``: the grids of min..max tiles, in vLLM's order."""
    ratios = {
        (i, j)
        for n in range(min_num, max_num + 1)
        for i in range(1, n + 1)
        for j in range(1, n + 1)
        if min_num <= i * j <= max_num
    }
    return sorted(ratios, key=lambda x: x[0] * x[1])


def closest_grid(width_px: int, height_px: int, ratios: list[Grid], image_size: int) -> Grid:
    """``find_closest_aspect_ratio``."""
    aspect_ratio = width_px / height_px
    best_ratio_diff = float("inf")
    best = (1, 1)
    half_tile_area = 0.5 * image_size * image_size
    area = width_px * height_px
    for ratio in ratios:
        ratio_diff = abs(aspect_ratio - ratio[0] / ratio[1])
        if ratio_diff < best_ratio_diff:
            best_ratio_diff, best = ratio_diff, ratio
        elif ratio_diff == best_ratio_diff and area > half_tile_area * ratio[0] * ratio[1]:
            best = ratio
    return best


@dataclass(frozen=True, slots=True)
class InternVLChatRule(TiledDownscale):
    """``2 + image_seq_length * (grid tiles + thumbnail)``."""

    family: str
    image_size_px: int
    min_dynamic_patch: int
    max_dynamic_patch: int
    use_thumbnail: bool
    tokens_per_tile: int
    wrapper_tokens: int = 0  # the template's "<image>" is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> InternVLChatRule:
        """InternVLChatModel, Skywork-R1V: the tile side is ``vision_config.image_size``."""
        vision = config.get("vision_config") or {}
        return cls._build(family, config, preprocessor, vision.get("image_size"))

    @classmethod
    def from_eagle_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> InternVLChatRule:
        """Eagle 2.5: ``force_image_size`` or else ``vision_config.image_size``."""
        vision = config.get("vision_config") or {}
        return cls._build(
            family, config, preprocessor, config.get("force_image_size") or vision.get("image_size")
        )

    @classmethod
    def from_qianfan_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> InternVLChatRule:
        """Qianfan-OCR: QianfanOCRProcessingInfo builds InternVLChatProcessor from
        transformers' QianfanOCRConfig, whose vision image_size / patch_size may be pairs
        (vLLM takes the first of each) and default to 448 / 14 where absent, its
        downsample_ratio to 0.5; the tiling values come from config.json's top level, as
        InternVL chat's."""
        vision = dict(config.get("vision_config") or {})
        for name, default in (("image_size", QIANFAN_IMAGE_SIZE_PX), ("patch_size", 14)):
            value = vision.get(name, default)
            vision[name] = value[0] if isinstance(value, (list, tuple)) else value
        filled = {
            **config,
            "vision_config": vision,
            "downsample_ratio": config.get("downsample_ratio", QIANFAN_DOWNSAMPLE_RATIO),
        }
        return cls._build(family, filled, preprocessor, vision["image_size"])

    @classmethod
    def over(cls, tiler: InternVLChatRule, **own: Any) -> Self:
        """A rule built on InternVL chat's tiles (H2OVL, NVLM-D): ``tiler``'s fields, then the
        subclass's ``own``."""
        return cls(**{f.name: getattr(tiler, f.name) for f in fields(tiler)}, **own)

    @classmethod
    def _build(
        cls, family: str, config: dict[str, Any], knobs: dict[str, Any], image_size: Any
    ) -> InternVLChatRule:
        # vLLM: kwargs.setdefault(knob, config value), then InternVLChatImageProcessor(**kwargs).
        def value(name: str) -> Any:
            found = knobs.get(name, config.get(name))
            if found is None:
                raise ValueError(f"InternVL chat config has no {name}")
            return found

        vision = config.get("vision_config") or {}
        side = int(knobs.get("image_size", image_size) or 0)
        patch = int(vision.get("patch_size") or 0)
        if side < 1 or patch < 1:
            raise ValueError("InternVL chat config has no vision_config image_size/patch_size")
        tokens_per_tile = int((side // patch) ** 2 * (float(value("downsample_ratio")) ** 2))
        dynamic = bool(value("dynamic_image_size"))
        return cls(
            family,
            side,
            int(value("min_dynamic_patch")) if dynamic else 1,
            int(value("max_dynamic_patch")) if dynamic else 1,
            bool(value("use_thumbnail")),
            tokens_per_tile,
        )

    def grid(self, width_px: int, height_px: int) -> Grid:
        """``find_closest_aspect_ratio`` over the knobs' grids: the tiles the image is cut into."""
        ratios = target_ratios(self.min_dynamic_patch, self.max_dynamic_patch)
        return closest_grid(width_px, height_px, ratios, self.image_size_px)

    def with_thumbnail(self, blocks: int) -> int:
        """A grid's tiles plus the thumbnail, added when there is more than one tile."""
        return blocks + 1 if self.use_thumbnail and blocks != 1 else blocks

    def tiles(self, width_px: int, height_px: int) -> int:
        """``calculate_internvl_targets``: the grid's tiles, plus the thumbnail."""
        columns, rows = self.grid(width_px, height_px)
        return self.with_thumbnail(columns * rows)

    def tile_counts(self) -> frozenset[int]:
        """Every tile count an image can get, thumbnail included."""
        return frozenset(
            self.with_thumbnail(c * r)
            for c, r in target_ratios(self.min_dynamic_patch, self.max_dynamic_patch)
        )

    def tokens_for_tiles(self, tiles: int) -> int:
        """The replacement's length for an image of ``tiles`` tiles."""
        return BOUNDARY_TOKENS + self.tokens_per_tile * tiles

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=self.tokens_for_tiles(self.tiles(width_px, height_px)),
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=max(self.tokens_for_tiles(n) for n in self.tile_counts()),
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image cut to each grid's shape, at the tile side and at the image's own scale."""
        candidates: list[Size] = []
        side = self.image_size_px
        for columns, rows in target_ratios(self.min_dynamic_patch, self.max_dynamic_patch):
            largest = min(width_px // columns, height_px // rows)
            # At one tile's side per cell the tie rule keeps the grid; at the image's scale
            # the grid is the least distorted one.
            for scale in {largest, min(largest, side // 2 + 1), min(largest, side)}:
                if scale >= 1:
                    candidates.append((columns * scale, rows * scale))
        return candidates

    def describe(self) -> str:
        thumbnail = " + thumbnail" if self.use_thumbnail else ""
        return (
            f"{self.min_dynamic_patch}-{self.max_dynamic_patch} tiles of {self.image_size_px} px"
            f"{thumbnail}; tokens = {BOUNDARY_TOKENS} + {self.tokens_per_tile} per tile, up to "
            f"{self.max_image_tokens().tokens:,}"
        )
