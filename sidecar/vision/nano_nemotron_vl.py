"""Nemotron Nano VL v2 and the Nemotron-H Omni V3 models: tiles, or a dynamic resolution.

vLLM 0.33 serves ``NemotronH_Nano_VL_V2`` and the three ``NemotronH_*_Omni_Reasoning_V3``
(``model_executor/models/nano_nemotron_vl.py``) with its own ``NanoNemotronVLProcessor``
(``transformers_utils/processors/nano_nemotron_vl.py``). Each image becomes ``<img>`` +
``<image>`` x features + ``</img>``; the features come from one of two modes, chosen by the
config (``use_dynamic_resolution``: ``vision_config.args`` holds ``min_num_patches``):

* tiles: InternVL's tiler (``calculate_internvl_targets``) over 1 to ``max_num_tiles`` tiles of
  ``force_image_size`` px, plus a thumbnail when more than one and ``use_thumbnail``; each tile
  ``(force_image_size // patch_size)² x downsample_ratio²`` features. ``max_num_tiles`` is the
  processor's one count knob (12 unset). Each image's count is its own: this is
  ``InternVLChatRule`` with those values.
* dynamic resolution (``DynamicResolutionImageTiler``): the image's patch grid of
  ``patch_size`` px (each side ``round(side / patch + 0.5)``), scaled by
  ``min(1, sqrt(budget / patches))``, raised to ``min_num_patches`` where below it, each side
  then rounded to an even count; ``features = patches / 4``. The budget is shared by all the
  images the processor handles at once: ``4 x (max_model_len - 4)`` (vLLM hands the processor
  a dummy text of bare ``<image>`` tokens, so no text counts), each image's share clipped to
  ``[min_num_patches, max_num_patches]``, all of them scaled down together while their sum
  exceeds it.

The dynamic mode's count therefore depends on the rest of the request and on the server's
``max_model_len``, which the profile does not know when it is built; and it is not monotone
in the budget (a smaller budget can round a side up to even where a larger one rounds it
down). The sidecar prices the most patches ``process_media`` gives the image for any budget
from ``min_num_patches`` to its share alone, taking ``max_model_len`` as the text model's
``max_position_embeddings`` (vLLM's default and the most it allows): never below vLLM's count
for the image in any request, beside any other images, or under a smaller ``max_model_len``;
equal to its count for the image alone except where a smaller budget gives more (about 2 % of
sizes in the renderer tier, by up to about a hundred tokens). Every budget is accounted for
without trying each: ``most_patches`` tries the budgets where the scaled grid or one of the
rounding's comparisons changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.internvl_chat import InternVLChatRule
from sidecar.vision.tiling import Size, TiledDownscale

BOUNDARY_TOKENS = 2  # <img> and </img>
DEFAULT_NUM_TILES = 12  # nano_nemotron_vl.DEFAULT_NUM_TILES
# NanoNemotronVLProcessor's keyword arguments that reach an image's count.
PROCESSOR_KNOBS = frozenset({"max_num_tiles"})
PIXEL_SHUFFLE = 2  # DynamicResolutionImageTiler asserts a 0.5 downsample: 2 x 2 patches a token
RESERVED_TOKENS = 4  # max_num_tokens_available: max_model_len - text - 4
BUDGET_ROUNDS = 10  # compute_params' loop bound; past it vLLM raises


def _next_change(budget: int, high: int, side: Callable[[int], int], patches: int) -> int:
    """The least budget above ``budget`` (at most ``high + 1``) where ``side(budget)``, a
    scaled side that never falls as the budget grows, changes."""
    now = side(budget)
    if side(high) == now:
        return high + 1
    # side(b) = floor(min(1, sqrt(b / patches)) x n) passes now + 1 near
    # patches x ((now + 1) / n)²; n is unknown here, so search: the side is monotone.
    low, top = budget, high  # side(low) == now, side(top) > now
    while top - low > 1:
        middle = (low + top) // 2
        if side(middle) == now:
            low = middle
        else:
            top = middle
    return top


def _text_model(config: dict[str, Any]) -> dict[str, Any]:
    found = config.get("text_config") or config.get("llm_config") or config
    return found if isinstance(found, dict) else {}


def uses_dynamic_resolution(config: dict[str, Any]) -> bool:
    """``BaseNanoNemotronVLProcessor.use_dynamic_resolution``."""
    args = (config.get("vision_config") or {}).get("args") or {}
    return "min_num_patches" in args


def from_configs(
    family: str, config: dict[str, Any], preprocessor: dict[str, Any]
) -> InternVLChatRule | NanoNemotronDynamicRule:
    """The tile rule or the dynamic-resolution rule, as the config chooses."""
    if uses_dynamic_resolution(config):
        return NanoNemotronDynamicRule.from_configs(family, config, preprocessor)
    side = int(config["force_image_size"])
    patch = int(config["patch_size"])
    ratio = float(config["downsample_ratio"])
    return InternVLChatRule(
        family,
        side,
        1,
        int(preprocessor.get("max_num_tiles") or DEFAULT_NUM_TILES),
        bool(config.get("use_thumbnail")),
        int((side // patch) ** 2 * ratio**2),
    )


@dataclass(frozen=True, slots=True)
class NanoNemotronDynamicRule(TiledDownscale):
    """``2 + patches / 4`` of ``DynamicResolutionImageTiler`` for the image alone."""

    family: str
    patch_px: int
    min_num_patches: int
    max_num_patches: float  # inf where the config gives 0 or less
    context_tokens: int  # max_model_len as priced: the text model's max_position_embeddings
    wrapper_tokens: int = 0  # the template's <image> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> NanoNemotronDynamicRule:
        if float(config["downsample_ratio"]) != 1 / PIXEL_SHUFFLE:
            raise ValueError("vLLM's dynamic-resolution tiler takes a downsample_ratio of 0.5 only")
        args = config["vision_config"]["args"]
        most = int(args["max_num_patches"])
        return cls(
            family,
            int(config["patch_size"]),
            int(args["min_num_patches"]),
            most if most > 0 else math.inf,
            int(_text_model(config)["max_position_embeddings"]),
        )

    def patch_grid(self, width_px: int, height_px: int) -> tuple[int, int]:
        """``process_media``'s starting grid: each side ``round(side / patch + 0.5)``."""
        return round(width_px / self.patch_px + 0.5), round(height_px / self.patch_px + 0.5)

    def scaled(self, columns: int, rows: int, budget: int) -> tuple[int, int]:
        """``process_media``'s first step: the grid scaled by ``min(1, sqrt(budget / patches))``."""
        factor = min(math.sqrt(budget / (rows * columns)), 1.0)
        return math.floor(factor * columns), math.floor(factor * rows)

    def grid(self, width_px: int, height_px: int, budget: int) -> tuple[int, int]:
        """``process_media``: the (columns, rows) of patches for one image and budget.
        ZeroDivisionError where vLLM's raises it (a side scaled to no patches)."""
        columns, rows = self.scaled(*self.patch_grid(width_px, height_px), budget)
        return self.rounded(columns, rows, budget)

    def rounded(self, columns: int, rows: int, budget: int) -> tuple[int, int]:
        """``process_media`` after the scaling: raised to ``min_num_patches``, sides even."""
        if budget > self.min_num_patches and rows * columns < self.min_num_patches:
            up = math.sqrt(self.min_num_patches / (rows * columns))
            rows, columns = math.ceil(up * rows), math.ceil(up * columns)
        even = PIXEL_SHUFFLE
        if rows % even:
            if (rows + even - rows % even) * columns <= budget:
                rows += even - rows % even
            else:
                rows = max(even, rows - rows % even)
        if columns % even:
            if rows * (columns + even - columns % even) <= budget:
                columns += even - columns % even
            else:
                columns = max(even, columns - columns % even)
        return columns, rows

    def available_patches(self) -> int:
        """``compute_params``' budget in patches: ``4 x (max_model_len - 4)``, at least one
        image's minimum."""
        return max((self.context_tokens - RESERVED_TOKENS) * PIXEL_SHUFFLE**2, self.min_num_patches)

    def share_patches(self) -> int:
        """One image's first share: the budget clipped to ``[min, max]_num_patches``."""
        return int(max(min(self.available_patches(), self.max_num_patches), self.min_num_patches))

    def patches_alone(self, width_px: int, height_px: int) -> int:
        """``compute_params`` for the image alone: its share, cut while over the budget."""
        available = self.available_patches()
        share = self.share_patches()
        for _ in range(BUDGET_ROUNDS):
            columns, rows = self.grid(width_px, height_px, share)
            total = columns * rows
            if total <= available:
                return total
            scaled = max(self.min_num_patches, int(total * (available / total)))
            share = scaled if scaled < share else self.min_num_patches
        raise ValueError(f"{width_px}x{height_px}: vLLM's budget loop does not settle")

    def most_patches(self, width_px: int, height_px: int) -> int:
        """The most patches ``process_media`` gives the image for any budget from
        ``min_num_patches`` to its share: every budget ``compute_params`` can hand it, alone or
        beside other images, or under a smaller ``max_model_len``. A smaller budget can give
        more (its sides round up to even where a larger one's do not), so every budget counts:
        the budgets where the scaled grid changes, and within each such run the budgets where
        one of the rounding's comparisons (or the raise to the minimum) changes."""
        columns0, rows0 = self.patch_grid(width_px, height_px)
        patches = columns0 * rows0
        low, high = self.min_num_patches, self.share_patches()
        best = 0
        budget = low
        while budget <= high:
            columns, rows = self.scaled(columns0, rows0, budget)
            following = min(
                _next_change(budget, high, lambda b: self.scaled(columns0, rows0, b)[0], patches),
                _next_change(budget, high, lambda b: self.scaled(columns0, rows0, b)[1], patches),
            )
            sides = [(columns, rows)]
            if 0 < columns * rows < self.min_num_patches:
                up = math.sqrt(self.min_num_patches / (rows * columns))
                sides.append((math.ceil(up * columns), math.ceil(up * rows)))
            critical = {budget, low + 1}
            for c, r in sides:
                critical.update({(r + 1) * c, r * (c + 1), (r + 1) * (c + 1)})
                critical.add(max(PIXEL_SHUFFLE, r - 1) * (c + 1))
            for candidate in critical:
                if budget <= candidate < following:
                    try:
                        c, r = self.rounded(columns, rows, candidate)
                    except ZeroDivisionError:  # vLLM fails on that budget: no count
                        continue
                    best = max(best, c * r)
            budget = following
        return best

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        try:
            alone = self.patches_alone(width_px, height_px)
            most = self.most_patches(width_px, height_px)
        except ZeroDivisionError:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px}: vLLM's dynamic-resolution tiler scales a side "
                "to no patches and fails"
            ) from None
        return ImageTokens(
            tokens=BOUNDARY_TOKENS + max(alone, most) // PIXEL_SHUFFLE**2,
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        # A grid stays within its share but where a side of one patch is raised to two, which
        # at most doubles it; and never above the budget, which compute_params enforces.
        most = min(self.available_patches(), 2 * self.share_patches())
        return ImageTokens(
            tokens=BOUNDARY_TOKENS + most // PIXEL_SHUFFLE**2,
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image scaled to a run of patch counts: the count falls with the area."""
        candidates: list[Size] = []
        for step in range(1, 65):
            scale = step / 64
            candidates.append((max(1, int(width_px * scale)), max(1, int(height_px * scale))))
        return candidates

    def describe(self) -> str:
        return (
            f"dynamic resolution: {self.patch_px} px patches, {self.min_num_patches} to "
            f"{self.max_num_patches} per image, 4 a token; tokens = {BOUNDARY_TOKENS} + "
            f"patches / 4, up to {self.max_image_tokens().tokens:,}"
        )
