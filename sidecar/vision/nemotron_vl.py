"""Llama-Nemotron-Nano-VL: InternVL chat's replacement over its own grid choice.

vLLM 0.33 serves ``Llama_Nemotron_Nano_VL`` (``model_executor/models/nemotron_vl.py``) with
``LlamaNemotronNanoVLProcessor`` (``transformers_utils/processors/nemotron_vl.py``), an
``InternVLChatProcessor`` whose replacement is InternVL chat's (``<img>`` + ``<image>`` per
feature + ``</img>``, ``image_seq_length = (image_size // patch_size)² x downsample_ratio²``
per tile) but whose grid is chosen differently: among the grids of 1 to ``max_num_tiles``
tiles, the one with the largest ``min(tiles x image_size² / area, 0.6) x closeness``, where
closeness is the smaller of the two aspect-ratio quotients (the first maximum wins); a
thumbnail is added when there is more than one tile and ``use_thumbnail``.

``image_size``, ``max_num_tiles`` and ``use_thumbnail`` are the attributes of the checkpoint's
own (remote-code) image processor, which vLLM builds from ``preprocessor_config.json`` and the
server's kwargs (transformers sets a kwarg naming an existing attribute on the instance). vLLM
wraps them in ``LlamaNemotronNanoVLImageProcessor`` with tiles from 1 to ``max_num_tiles``,
always dynamic; but the server's ``min_dynamic_patch``, ``max_dynamic_patch`` and
``dynamic_image_size`` also reach that processor's call, which tiles the image, and the
placeholder is built from the tiles it made (``image_num_patches``), so they are honoured
too (vLLM's own ``get_num_image_tokens``, which it profiles with, ignores them). The sidecar
reads the three attributes from ``preprocessor_config.json`` with the kwargs over them, the
three call knobs from the kwargs alone, and refuses a directory that lacks an attribute: the
remote class's own default cannot be read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.vision import SERVER_KWARGS
from sidecar.vision.internvl_chat import Grid, InternVLChatRule, target_ratios

# The remote image processor's attributes vLLM's count reads, which the server's kwargs set.
ATTRIBUTE_KNOBS = frozenset({"image_size", "max_num_tiles", "use_thumbnail"})
# The tiling call's arguments (InternVLChatProcessor.__call__), from the server's kwargs only.
CALL_KNOBS = frozenset({"min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size"})
PROCESSOR_KNOBS = ATTRIBUTE_KNOBS | CALL_KNOBS
SIZE_FACTOR_CAP = 0.6  # find_closest_aspect_ratio: a grid gains nothing past 0.6 x the area


def closest_grid(width_px: int, height_px: int, ratios: list[Grid], image_size: int) -> Grid:
    """``nemotron_vl.find_closest_aspect_ratio``, float for float."""
    aspect_ratio = width_px / height_px
    area = width_px * height_px
    best_factor = float("-inf")
    best = (1, 1)
    for columns, rows in ratios:
        target = columns / rows
        size_factor = min((columns * rows * image_size * image_size) / area, SIZE_FACTOR_CAP)
        closeness = min(target / aspect_ratio, aspect_ratio / target)
        factor = size_factor * closeness
        if factor > best_factor:
            best_factor, best = factor, (columns, rows)
    return best


@dataclass(frozen=True, slots=True)
class NemotronVLRule(InternVLChatRule):
    """InternVL chat's count over ``find_closest_aspect_ratio``'s size-weighted grid."""

    @classmethod
    def from_nemotron_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> NemotronVLRule:
        """``NemotronVLProcessingInfo``: the remote image processor's three values, and the
        server's tiling kwargs as its call takes them."""
        missing = sorted(ATTRIBUTE_KNOBS - preprocessor.keys())
        if missing:
            raise ValueError(
                f"Llama-Nemotron-Nano-VL's preprocessor_config.json has no {', '.join(missing)}: "
                "vLLM takes it from the checkpoint's remote image processor, not read here"
            )
        vision = config.get("vision_config") or {}
        side = int(preprocessor["image_size"])
        patch = int(vision.get("patch_size") or 0)
        ratio = config.get("downsample_ratio")
        if side < 1 or patch < 1 or ratio is None:
            raise ValueError("Nemotron VL config has no vision_config.patch_size/downsample_ratio")
        # InternVLChatImageProcessor.resolve_min_max_num: a call kwarg left unset is the
        # processor's own (1, max_num_tiles, dynamic); not dynamic means one tile.
        server = preprocessor.get(SERVER_KWARGS) or {}
        dynamic = bool(server.get("dynamic_image_size", True))
        least = int(server.get("min_dynamic_patch", 1)) if dynamic else 1
        most = int(server.get("max_dynamic_patch", preprocessor["max_num_tiles"])) if dynamic else 1
        return cls(
            family,
            side,
            least,
            most,
            bool(preprocessor["use_thumbnail"]),
            int((side // patch) ** 2 * (float(ratio) ** 2)),
        )

    def grid(self, width_px: int, height_px: int) -> Grid:
        ratios = target_ratios(self.min_dynamic_patch, self.max_dynamic_patch)
        return closest_grid(width_px, height_px, ratios, self.image_size_px)
