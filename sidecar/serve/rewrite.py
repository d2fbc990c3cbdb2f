"""Apply a ``Downscale`` decision to the request body, keeping every other byte.

Image resizing is CPU-bound and runs in the bounded thread pool; the event loop only
splices the new data URIs into the original body.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from concurrent.futures import Executor

import orjson

from sidecar.admission.decision import Downscale
from sidecar.body import body_json
from sidecar.body.body_lift import splice
from sidecar.body.refs import ImageRef
from sidecar.body.request_body import RequestBody
from sidecar.errors import NotBase64Error
from sidecar.images.resize import DownscaledImage, downscale_image


async def apply_downscale(
    body: bytes,
    parsed: RequestBody,
    decision: Downscale,
    *,
    executor: Executor,
    max_decode_pixels: int,
    jpeg_quality: int,
    durations_seconds: list[float],
) -> bytes:
    """The body with smaller images, or with vLLM's ``max_pixels`` added."""
    if decision.processor_max_pixels is not None:
        return with_processor_max_pixels(body, decision.processor_max_pixels)
    refs = {ref.index: ref for ref in parsed.images}
    loop = asyncio.get_running_loop()
    jobs = [
        loop.run_in_executor(
            executor,
            _resize,
            bytes(refs[resize.index].payload(body)),
            resize.to_size,
            max_decode_pixels,
            jpeg_quality,
        )
        for resize in decision.resizes
    ]
    results = await asyncio.gather(*jobs)
    replacements = []
    for resize, (image, seconds) in zip(decision.resizes, results, strict=True):
        durations_seconds.append(seconds)
        replacements.append(_replacement(refs[resize.index], image))
    return splice(body, replacements)


def _resize(
    payload: bytes, size: tuple[int, int], max_decode_pixels: int, jpeg_quality: int
) -> tuple[DownscaledImage, float]:
    started = time.perf_counter()
    try:
        raw = base64.b64decode(payload, validate=True)
    except binascii.Error as exc:
        raise NotBase64Error(f"image payload is not valid base64: {exc}") from exc
    image = downscale_image(
        raw, size, max_decode_pixels=max_decode_pixels, jpeg_quality=jpeg_quality
    )
    return image, time.perf_counter() - started


def _replacement(ref: ImageRef, image: DownscaledImage) -> tuple[tuple[int, int], bytes]:
    return ref.replacement(image.media_type, base64.b64encode(image.data))


def with_processor_max_pixels(body: bytes, max_pixels: int) -> bytes:
    """Ask vLLM to resize: ``mm_processor_kwargs.max_pixels`` (needs --trust-request-mm-kwargs)."""
    return merge_top_level_object(body, "mm_processor_kwargs", {"max_pixels": max_pixels})


def with_stream_usage(body: bytes) -> bytes:
    """Ask vLLM for the final usage chunk: ``stream_options.include_usage``. A client's
    ``continuous_usage_stats``, which vLLM honours only with ``include_usage``, is turned off:
    the client asked for no usage, and every chunk would carry it."""
    updates: dict[str, object] = {"include_usage": True}
    if b'"continuous_usage_stats"' in body:
        updates["continuous_usage_stats"] = False
    return merge_top_level_object(body, "stream_options", updates)


def merge_top_level_object(body: bytes, key: str, updates: dict[str, object]) -> bytes:
    """Set fields of a top-level object; other bytes stay as sent when the key is new."""
    quoted = orjson.dumps(key)
    if quoted not in body:
        start = body.index(b"{") + 1
        field = quoted + b":" + orjson.dumps(updates)
        separator = b"" if body[start:].lstrip().startswith(b"}") else b","
        return body[:start] + field + separator + body[start:]
    document = body_json.loads(body)
    current = document.get(key)
    document[key] = {**(current if isinstance(current, dict) else {}), **updates}
    return body_json.dumps(document)
