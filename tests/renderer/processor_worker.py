"""Runs inside ``.tools/vllm-render`` (vLLM 0.33, CPU torch): vLLM's own multimodal processor,
in-process, on the model directories of a job, answering one outcome per size.

    .tools/vllm-render/bin/python tests/renderer/processor_worker.py JOB.json OUT.json

The job is ``[{"name", "directory", "sizes": [[w, h], ...], "applied": [[w, h], ...],
"prompt", "count"}]``. For each model the worker builds vLLM's ``ModelConfig`` and the processor
``MULTIMODAL_REGISTRY.create_processor`` makes for it (what ``vllm serve`` and ``vllm launch
render`` use), then per size:

1. vLLM's decode limit, as ``ImageMediaIO.load_bytes`` applies it to a PNG of that size (up
   to the decode, see ``_limit_refusal``);
2. the placeholder count vLLM's processor computes from the size alone,
   ``info.get_num_image_tokens`` (its extra arguments, the image or HF processor and the
   request's mm kwargs, supplied as ``_get_prompt_updates`` supplies them), or, for a job
   whose ``"count"`` is ``"replacement"``, the length of the replacement
   ``_get_prompt_updates`` makes for an item of that size; an exception is a refusal.

For ``applied`` sizes it also runs the full ``processor(prompt, images)`` (the HF processor
on a real image, then vLLM's prompt updates) and reports the placeholder's length, which the
test requires to equal the size-only count. Imports nothing from the sidecar.
"""

from __future__ import annotations

import inspect
import json
import os
import struct
import sys
import zlib
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def _png_header(width: int, height: int) -> bytes:
    """A PNG of this size with no pixel data: Pillow opens it, the size is in IHDR."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(b""))
        + _chunk(b"IEND", b"")
    )


class _PassedTheLimits(Exception):
    """Raised where ``load_bytes`` goes on to decode: the size passed every limit check."""


def _limit_refusal(width: int, height: int) -> str | None:
    """vLLM's refusal of this size as it loads the image, or None when the size passes.

    ``ImageMediaIO.load_bytes`` runs as vLLM runs it up to the decode, which is replaced by
    a raise (decoding a PNG of 179 M px would allocate half a gigabyte for nothing). Pillow's
    bomb check (``DecompressionBombError`` above 2 x ``Image.MAX_IMAGE_PIXELS``, the same
    178,956,970 px, which vLLM never changes) fires inside ``Image.open``, before vLLM's own
    ``VLLM_MAX_IMAGE_PIXELS`` check: both are the decode limit refusing the image."""
    from PIL import Image
    from vllm.multimodal.media import image as vllm_image

    def stop(_image: object) -> object:
        raise _PassedTheLimits

    decode, vllm_image.normalize_image = vllm_image.normalize_image, stop
    try:
        vllm_image.ImageMediaIO().load_bytes(_png_header(width, height))
    except _PassedTheLimits:
        return None
    except Image.DecompressionBombError as exc:
        return f"pixel limit: {exc}"
    except ValueError as exc:
        if "exceed the maximum" in str(exc):
            return f"pixel limit: {exc}"
        raise
    finally:
        vllm_image.normalize_image = decode
    raise AssertionError(f"{width}x{height}: load_bytes neither refused nor decoded")


def _count_function(info: Any) -> Any:
    """``info.get_num_image_tokens`` with the extra arguments its signature asks for."""
    parameters = inspect.signature(info.get_num_image_tokens).parameters
    extra: dict[str, Any] = {}
    if "image_processor" in parameters:
        extra["image_processor"] = info.get_image_processor()
    if "processor" in parameters:
        extra["processor"] = info.get_hf_processor()
    if "mm_kwargs" in parameters:
        extra["mm_kwargs"] = {}

    def count(width: int, height: int) -> int:
        return int(info.get_num_image_tokens(image_width=width, image_height=height, **extra))

    return count


def _replacement_count(processor: Any) -> Any:
    """The length of the replacement ``_get_prompt_updates`` makes for an image of this size,
    for families whose ``get_num_image_tokens`` is not the placeholder's length (Mistral3:
    the ``[IMG]`` tokens only, not the ``[IMG_BREAK]`` / ``[IMG_END]`` that follow each row).
    The item is a zero-stride array: only its shape is read, nothing is allocated."""
    import numpy as np
    from vllm.multimodal.inputs import MultiModalKwargsItems

    def count(width: int, height: int) -> int:
        image = np.broadcast_to(np.uint8(0), (height, width, 3))
        items = processor.info.parse_mm_data({"image": [image]})
        (update,) = processor._get_prompt_updates(items, {}, MultiModalKwargsItems({}))
        content = update.resolve(0).content
        mask = content.is_embed
        embeds = len(content.full) if mask is None else int(mask(content.full).sum())
        if not embeds:  # the HF processor makes no image with no patches: refused
            raise ValueError(f"no image tokens in the replacement ({len(content.full)} tokens)")
        return len(content.full)

    return count


def _no_size_only_count(width: int, height: int) -> int:
    """Llama 4: vLLM has no count from the size alone (``Mllama4ProcessingInfo`` has no
    ``get_num_image_tokens``; the replacement reads the ``aspect_ratios`` the HF processor
    returns), so a size is only checked against the decode limit."""
    raise ValueError("no size-only count: the replacement needs the HF processor's output")


def _outcome(count: Any, width: int, height: int, errors: list[str]) -> int | str:
    refusal = _limit_refusal(width, height)
    if refusal is not None:
        return refusal
    try:
        return count(width, height)
    except Exception as exc:  # the processor refuses this size
        errors.append(f"{width}x{height}: {type(exc).__name__}: {exc}")
        return "refused"


def _applied(processor: Any, prompt: str, width: int, height: int, errors: list[str]) -> int | str:
    from PIL import Image

    try:
        items = processor.info.parse_mm_data({"image": [Image.new("RGB", (width, height))]})
        out = processor(prompt, items)
    except Exception as exc:  # the processor refuses this image
        errors.append(f"applied {width}x{height}: {type(exc).__name__}: {exc}")
        return "refused"
    (placeholder,) = out["mm_placeholders"]["image"]
    return int(placeholder.length)


def _inspect_models_in_process() -> None:
    """vLLM inspects a model class in a fresh subprocess (to keep CUDA out of the parent);
    there is no GPU here, and a fresh process re-imports torch and vLLM per architecture
    (minutes on a cold cache), so the inspection runs in this process instead."""
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda function: function()  # type: ignore[attr-defined]


def _num2words_stand_in() -> None:
    """``SmolVLMProcessor`` refuses to be built without ``num2words``, which only its video
    prompts use (the frame timestamps) and which vLLM does not install: a stand-in lets the
    image path run; an image's prompt never calls it."""
    from transformers.models.smolvlm import processing_smolvlm

    if processing_smolvlm.num2words is None:
        processing_smolvlm.num2words = str


def run_model(job: dict[str, Any]) -> dict[str, Any]:
    import warnings

    from vllm.config import ModelConfig

    warnings.simplefilter("ignore")  # Pillow's bomb warnings, between 89 M and 179 M px
    from vllm.multimodal import MULTIMODAL_REGISTRY

    model_config = ModelConfig(
        model=job["directory"],
        tokenizer=job["directory"],
        max_model_len=4096,  # within every family's positions; nothing is allocated
        limit_mm_per_prompt={"image": 1},
        trust_remote_code=True,  # only the directory's own stand-in config module
    )
    processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    if job["count"] == "replacement":
        count = _replacement_count(processor)
    elif job["count"] == "none":
        count = _no_size_only_count
    else:
        count = _count_function(processor.info)
    errors: list[str] = []
    return {
        "info": type(processor.info).__name__,
        "counts": [_outcome(count, w, h, errors) for w, h in job["sizes"]],
        "applied": [_applied(processor, job["prompt"], w, h, errors) for w, h in job["applied"]],
        "errors": errors[:20],  # the first refusals' reasons, to read when a test fails
    }


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as file:
        jobs = json.load(file)
    _inspect_models_in_process()
    _num2words_stand_in()
    results: dict[str, Any] = {}
    for job in jobs:
        try:
            results[job["name"]] = run_model(job)
        except Exception as exc:  # reported to the test, which fails on it
            results[job["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
    with open(argv[2], "w", encoding="utf-8") as file:
        json.dump(results, file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
