"""ERNIE-4.5-VL: Qwen2-VL's ``smart_resize`` within the remote processor's image bounds.

vLLM 0.33 serves ``Ernie4_5_VLMoeForConditionalGeneration`` through the checkpoint's remote
processor (``processing_ernie4_5_vl.py``, ``trust_remote_code``) and takes each image's count
from the grid it returns (``ernie45_vl.py`` ``_get_prompt_updates``: ``grid_thw.prod()`` over
``spatial_conv_size²`` copies of ``<|IMAGE_PLACEHOLDER|>`` in place of
``<|image@placeholder|>``). The remote processor's ``_add_image`` makes that grid with its image
processor's ``get_smarted_resize`` over the *processor's* bounds, ``image_min_pixels`` /
``image_max_pixels`` (4 and 6,177 cells of 28 px by default), not the image processor's own:
its ``smart_resize`` is transformers' Qwen2-VL one line for line (round each side to
``patch_size x merge_size`` = 28 px, scale into the bounds, a side floored under the maximum kept
at one factor, an aspect ratio over 200 refused). ``tokens = h x w / 28²``, between the
template's ``<|IMAGE_START|>`` and ``<|IMAGE_END|>``.

vLLM's own ``Ernie4_5_VLProcessingInfo.get_num_image_tokens`` (its copy of the Paddle
processor's resize, over the image processor's ``size``) serves only its profiling: it clamps an
aspect ratio over 200 instead of refusing it, so it is not the prompt's count there.

``--mm-processor-kwargs``: ``image_min_pixels`` and ``image_max_pixels`` reach the remote
processor's constructor and so the count, at the top level; every other kwarg also reaches
remote code that is not run here, and is refused at start-up (``profiles.KNOBS_ONLY``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.vision import MODEL_DIRECTORY, SERVER_KWARGS
from sidecar.vision.qwen import QwenSmartResizeRule

# The remote Ernie4_5_VLProcessor's constructor defaults (processing_ernie4_5_vl.py).
ERNIE_IMAGE_MIN_PIXELS = 4 * 28 * 28
ERNIE_IMAGE_MAX_PIXELS = 6177 * 28 * 28
ERNIE_WRAPPER_TOKENS = 2  # <|IMAGE_START|> and <|IMAGE_END|> around each image
PROCESSOR_KNOBS = frozenset({"image_min_pixels", "image_max_pixels"})


def processor_bounds(preprocessor: dict[str, Any]) -> dict[str, Any]:
    """The remote processor's constructor values as vLLM builds it: the server's knobs over
    ``processor_config.json``'s (transformers hands the processor that file's values, never
    ``preprocessor_config.json``'s, which go to the image processor). A built-in profile has
    no directory: its values are taken as the processor's."""
    directory = preprocessor.get(MODEL_DIRECTORY)
    if directory is None:
        files = {key: preprocessor[key] for key in PROCESSOR_KNOBS if key in preprocessor}
    else:
        path = Path(directory) / "processor_config.json"
        files = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    server = preprocessor.get(SERVER_KWARGS) or {}
    return {
        key: server.get(key, files.get(key))
        for key in PROCESSOR_KNOBS
        if server.get(key, files.get(key)) is not None
    }


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ERNIE-4.5-VL {name} must be a positive integer: {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Ernie45VLRule(QwenSmartResizeRule):
    """Qwen2-VL's smart_resize arithmetic over the remote processor's image bounds."""

    wrapper_tokens: int = ERNIE_WRAPPER_TOKENS

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Ernie45VLRule:
        """Build from the image processor's ``patch_size`` / ``merge_size``, ``config.json``'s
        ``spatial_conv_size`` and the processor's ``image_min_pixels`` / ``image_max_pixels``
        (``processor_bounds``; the remote processor's defaults where absent)."""
        patch = _positive_int("patch_size", preprocessor.get("patch_size", 14))
        merge = _positive_int("merge_size", preprocessor.get("merge_size", 2))
        spatial_conv = _positive_int("spatial_conv_size", config.get("spatial_conv_size", 2))
        if merge != spatial_conv:
            # The grid is cut in merge_size cells, the count and the resampler merge
            # spatial_conv_size ones: the two would disagree.
            raise ValueError(
                f"ERNIE-4.5-VL merge_size {merge} differs from spatial_conv_size {spatial_conv}"
            )
        bounds = processor_bounds(preprocessor)
        min_pixels = _positive_int(
            "image_min_pixels", bounds.get("image_min_pixels", ERNIE_IMAGE_MIN_PIXELS)
        )
        max_pixels = _positive_int(
            "image_max_pixels", bounds.get("image_max_pixels", ERNIE_IMAGE_MAX_PIXELS)
        )
        return cls(family, patch, merge, min_pixels, max_pixels)
