"""vLLM 0.33's own multimodal processors, run in-process: the oracle for the new families.

Run with ``.tools/vllm-render/bin/python`` (vLLM 0.33.0 on CPU torch, no GPU, no weights),
never imported by the sidecar's tests themselves: they write a spec, run this once for every
family, and read the answers back::

    .tools/vllm-render/bin/python tests/renderer/vllm_processors.py SPEC.json ANSWERS.json

SPEC holds ``{"families": [{"name", "directory", "mm_processor_kwargs", "count", "prompt",
"sizes", "apply", "modality"}]}`` (``modality``: ``image`` unless the family's processor
takes another, Kimi-K2.5's ``vision_chunk``). For each family this builds vLLM's processor
from the model directory as ``vllm serve`` would (``ModelConfig`` +
``MULTIMODAL_REGISTRY.create_processor``), then:

* ``sizes``: the placeholder length vLLM's own counting code gives each (width, height)
  (``COUNTS[count]``: the processor's placeholder-count function, as vLLM's prompt update
  calls it, with the HF processor built once), thousands a second;
* ``apply``: the full ``processor(prompt, image)`` path (HF image processing, prompt
  updates, placeholder validation) on a blank image of each size: the placeholder's length.

An answer is the length, or ``"error: ..."`` where vLLM raises. A family whose processor
cannot be built answers ``{"error": ...}``. ANSWERS maps each name to
``{"counts": [...], "apply": [...], "seconds": float}``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

Count = Callable[[int, int], int]


def _gemma4(processor: Any) -> Count:
    # Gemma4MultiModalProcessor._get_prompt_updates.get_replacement_image, sizes for items.
    from vllm.model_executor.models import gemma4_mm

    info = processor.info
    hf = info.get_hf_processor()
    value, _ = gemma4_mm._get_max_soft_tokens(info.ctx.get_merged_mm_kwargs({}))
    budget = value if isinstance(value, int) and value in gemma4_mm._SUPPORTED_SOFT_TOKENS else None

    def count(width: int, height: int) -> int:
        details = info.get_image_repl(
            image_width=width, image_height=height, processor=hf, max_soft_tokens=budget
        )
        return len(details.full)

    return count


def _internvl_style(processor: Any) -> Count:
    # BaseInternVLMultiModalProcessor._get_prompt_repl_image.get_replacement_internvl.
    info = processor.info
    hf = info.get_hf_processor()

    def count(width: int, height: int) -> int:
        features = info.get_num_image_tokens(image_width=width, image_height=height, processor=hf)
        return len(hf.get_image_repl(None, num_features=features).full)

    return count


def _image_repl(processor: Any) -> Count:
    # Families whose info builds each image's replacement from its size (Gemma 3n).
    info = processor.info
    hf = info.get_hf_processor()

    def count(width: int, height: int) -> int:
        details = info.get_image_repl(image_width=width, image_height=height, processor=hf)
        return len(details.full)

    return count


def _paddleocr_vl(processor: Any) -> Count:
    # PaddleOCRVLMultiModalProcessor._get_prompt_updates.get_replacement.
    info = processor.info
    image_processor = info.get_image_processor()

    def count(width: int, height: int) -> int:
        return int(
            info.get_num_image_tokens(
                image_width=width, image_height=height, image_processor=image_processor,
                mm_kwargs={},
            )
        )  # fmt: skip

    return count


def _ovis2_5(processor: Any) -> Count:
    # Ovis2_5MultiModalProcessor._get_prompt_updates.get_replacement_ovis takes the grid the
    # HF processor made (preprocess_multidata: its smart_resize, then patches of patch_size);
    # here the same functions of the processor, on the size alone.
    from vllm.transformers_utils.processors import ovis2_5

    hf = processor.info.get_hf_processor()

    def count(width: int, height: int) -> int:
        min_pixels = min(ovis2_5.MAX_PIXELS, ovis2_5.MIN_PIXELS)
        resized_h, resized_w = hf.smart_resize(
            height, width, factor=hf.patch_size * hf.hidden_stride,
            min_pixels=min_pixels, max_pixels=ovis2_5.MAX_PIXELS,
        )  # fmt: skip
        grid = [1, resized_h // hf.patch_size, resized_w // hf.patch_size]
        if 0 in grid:  # the HF processor cannot make an image with no patches: apply raises
            raise ValueError(f"no patches: grid {grid}")
        return len(hf.construct_visual_placeholders(grid))

    return count


class _Sized:
    """An image as far as a count reads it: its size (PIL's ``(width, height)``)."""

    def __init__(self, width: int, height: int) -> None:
        self.size = (width, height)


def _kimi_k25(processor: Any) -> Count:
    # KimiK25MultiModalProcessor._get_prompt_updates.get_replacement: media_tokens_calculator,
    # which converts the item to RGB (a no-op for its size) and reads get_resize_config.
    image_processor = processor.info.image_processor

    def count(width: int, height: int) -> int:
        media = {"type": "image", "image": _Sized(width, height)}
        return int(image_processor.get_resize_config(media)["num_tokens"])

    return count


def _kimi_vl(processor: Any) -> Count:
    # KimiVLMultiModalProcessor._get_prompt_updates.get_replacement: vLLM's own
    # get_num_image_tokens; then the HF processor's resize, which refuses a side of 512
    # patches or more (the stand-in for the checkpoint's remote processor: not vLLM's code).
    info = processor.info
    image_processor = info.get_hf_processor().image_processor

    def count(width: int, height: int) -> int:
        tokens = int(info.get_num_image_tokens(image_width=width, image_height=height))
        patch = image_processor.patch_size
        if width // patch * (height // patch) > image_processor.in_token_limit:
            scale = math.sqrt(
                image_processor.in_token_limit / ((width // patch) * (height // patch))
            )
            width, height = int(width * scale), int(height * scale)
        cell = image_processor.merge_kernel_size[0] * patch
        if (
            min(width, height) == 0
            or max(-(-width // cell), -(-height // cell)) * cell // patch >= 512
        ):
            raise ValueError(f"Exceed pos emb: {width}x{height}")
        return tokens

    return count


def _lfm2_vl(processor: Any) -> Count:
    # Lfm2VLMultiModalProcessor._get_prompt_updates.get_image_replacement_lfm2vl: vLLM's
    # get_image_repl over the thumbnail's patch grid (spatial_shapes) that transformers' image
    # processor makes with its smart_resize, tokenized as vLLM encodes it.
    import torch

    info = processor.info
    hf = info.get_hf_processor()
    image_processor = hf.image_processor
    tokenizer = info.get_tokenizer()
    merged = info.ctx.get_merged_mm_kwargs({})

    def knob(name: str) -> Any:
        return merged.get(name, getattr(image_processor, name))

    patch = knob("encoder_patch_size")
    crop_patches = max(
        knob("max_image_tokens") * knob("downsample_factor") ** 2,
        (knob("tile_size") // patch) ** 2,
    )

    def count(width: int, height: int) -> int:
        thumb_w, thumb_h = image_processor.smart_resize(
            height=height, width=width, downsample_factor=knob("downsample_factor"),
            min_image_tokens=knob("min_image_tokens"), max_image_tokens=knob("max_image_tokens"),
            encoder_patch_size=patch,
        )  # fmt: skip
        grid_w, grid_h, _ = info._get_image_feature_grid_size(width, height, hf, {})
        thumb_patches = (thumb_h // patch) * (thumb_w // patch)
        if grid_w * grid_h != 1 and thumb_patches > crop_patches:
            # the processor stacks the thumbnail with its tiles: a larger one fails there
            raise ValueError(f"thumbnail of {thumb_patches} patches beside tiles")
        spatial_shapes = torch.tensor([[thumb_h // patch, thumb_w // patch]])
        replacement = info.get_image_repl(width, height, spatial_shapes, hf, {})
        return len(tokenizer.encode(replacement, add_special_tokens=False))

    return count


COUNTS: dict[str, Callable[[Any], Count]] = {
    "lfm2_vl": _lfm2_vl,
    "kimi_vl": _kimi_vl,
    "kimi_k25": _kimi_k25,
    "ovis2_5": _ovis2_5,
    "paddleocr_vl": _paddleocr_vl,
    "image_repl": _image_repl,
    "gemma4": _gemma4,
    "internvl_style": _internvl_style,
}


def _answer(call: Callable[[], int]) -> int | str:
    try:
        return call()
    except Exception as exc:  # vLLM's refusal is the answer
        return f"error: {type(exc).__name__}: {exc}"[:300]


def _applied(processor: Any, prompt: str, width: int, height: int, modality: str) -> int:
    image = Image.new("RGB", (width, height))
    # Kimi-K2.5's unified modality: vLLM's chat parser wraps each image as a vision chunk.
    item = {"type": "image", "image": image, "uuid": None} if modality == "vision_chunk" else image
    items = processor.info.parse_mm_data({modality: [item]})
    placeholders = processor(prompt, items)["mm_placeholders"][modality]
    return int(placeholders[0].length)


def run_family(family: dict[str, Any]) -> dict[str, Any]:
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    started = time.perf_counter()
    try:
        model_config = ModelConfig(
            model=family["directory"],
            tokenizer=family["directory"],
            max_model_len=family.get("max_model_len", 32768),
            trust_remote_code=family.get("trust_remote_code", True),
            limit_mm_per_prompt={"image": 4, "video": 0},
            mm_processor_kwargs=family.get("mm_processor_kwargs") or None,
        )
        processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        count = COUNTS[family["count"]](processor)
    except Exception as exc:  # vLLM's processor refuses its own configuration
        refusal = f"error: {type(exc).__name__}: {exc}"[:300]
        count = None
    counts = [
        refusal if count is None else _answer(lambda w=w, h=h: count(w, h))
        for w, h in family["sizes"]
    ]
    counted = time.perf_counter()
    applied = [
        _answer(
            lambda w=w, h=h: _applied(
                processor, family["prompt"], w, h, family.get("modality", "image")
            )
        )
        for w, h in family["apply"]
    ]
    return {
        "counts": counts,
        "apply": applied,
        "seconds": time.perf_counter() - started,
        "apply_seconds": time.perf_counter() - counted,
    }


def main(spec_path: str, answers_path: str) -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # before vLLM is imported
    with open(spec_path, encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    answers = {family["name"]: run_family(family) for family in spec["families"]}
    with open(answers_path, "w", encoding="utf-8") as answers_file:
        json.dump(answers, answers_file)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
