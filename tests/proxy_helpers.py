"""Helpers shared by the end-to-end proxy tests (``tests/test_proxy*.py``).

The expected figures are computed here from first principles (the vision rule, which the
oracle tests pin to the Hugging Face processors, and the KV arithmetic written out again), so a
test that compares them with the sidecar's headers checks the whole pipeline end to end.
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDictProxy
from PIL import Image

from sidecar.images.probe import probe_base64, probe_data_uri
from sidecar.profiles import load_profile
from sidecar.serve.keys import LEDGER
from sidecar.serve.server import RunningSidecar
from sidecar.vision import VisionRule
from tests.conftest import QWEN
from tests.imaging import data_uri, image_bytes

PROFILE = load_profile(QWEN)
RULE = PROFILE.vision
BYTES_PER_TOKEN = 2 * 28 * 4 * 128 * 2  # K and V x layers x KV heads x head_dim x bf16
TEMPLATE_OVERHEAD_TOKENS = 16
QWEN_WRAPPER_TOKENS = 2
DEFAULT_OUTPUT_TOKENS = 1024
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
PROMPT = "What is in the image?"
DECISION = "x-vlm-sidecar-decision"
VISUAL = "x-vlm-sidecar-visual-tokens"
PROMPT_TOKENS = "x-vlm-sidecar-prompt-tokens"
KV = "x-vlm-sidecar-kv-bytes"


@dataclass(frozen=True)
class Reply:
    """One answer as the client saw it."""

    status: int
    headers: CIMultiDictProxy[str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def prediction(self) -> tuple[int, int, int]:
        """(visual tokens, prompt tokens, KV bytes) from the ``x-vlm-sidecar-*`` headers."""
        return (
            int(self.headers[VISUAL]),
            int(self.headers[PROMPT_TOKENS]),
            int(self.headers[KV]),
        )


def url_of(sidecar: RunningSidecar, path: str = CHAT) -> str:
    return f"http://127.0.0.1:{sidecar.port}{path}"


async def post(
    session: aiohttp.ClientSession,
    sidecar: RunningSidecar,
    body: dict[str, Any] | bytes,
    path: str = CHAT,
    headers: dict[str, str] | None = None,
) -> Reply:
    """POST JSON to the sidecar and read the whole answer."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    async with session.post(url_of(sidecar, path), data=raw, headers=all_headers) as response:
        return Reply(response.status, response.headers, await response.read())


def ledger_is_idle(sidecar: RunningSidecar) -> bool:
    ledger = sidecar.app[LEDGER]
    return ledger.inflight_bytes == 0 and ledger.inflight_requests == 0 and ledger.queue_depth == 0


async def eventually(condition: Callable[[], bool], timeout_seconds: float = 3.0) -> bool:
    """Poll ``condition`` until it holds or the time is up; the last answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while not condition() and loop.time() < deadline:  # noqa: ASYNC110 - the sidecar's state has no event to wait on
        await asyncio.sleep(0.01)
    return condition()


def sample(sidecar: RunningSidecar, name: str, **labels: str) -> float:
    """A metric's value on the sidecar's own registry (0 when the series does not exist)."""
    registry = sidecar.registry
    labels = {"model": PROFILE.name, **labels}
    return registry.get_sample_value(name, labels) or 0.0


# --- expected figures ---------------------------------------------------------------------------


def kv_bytes(
    sequence_tokens: int, *, bytes_per_token: int = BYTES_PER_TOKEN, block_size: int = 16
) -> int:
    """Whole blocks of KV for a sequence: the arithmetic of vLLM's paged allocator."""
    return math.ceil(sequence_tokens / block_size) * block_size * bytes_per_token


def text_tokens(chars: int, chars_per_token: float = 3.0) -> int:
    return math.ceil(chars / chars_per_token) + TEMPLATE_OVERHEAD_TOKENS


def expected(
    sizes: Sequence[tuple[int, int]] = (),
    *,
    text_chars: int = len(PROMPT),
    output_tokens: int = DEFAULT_OUTPUT_TOKENS,
    n: int = 1,
    media_tokens: int = 0,
    image_tokens: Sequence[int] | None = None,
    rule: VisionRule = RULE,
    chars_per_token: float = 3.0,
    bytes_per_token: int = BYTES_PER_TOKEN,
    block_size: int = 16,
) -> tuple[int, int, int]:
    """(visual tokens, prompt tokens, KV bytes) for a request with images of ``sizes``."""
    tokens = (
        list(image_tokens)
        if image_tokens is not None
        else [rule.image_tokens(w, h).tokens for w, h in sizes]
    )
    visual = sum(tokens) + media_tokens
    prompt = visual + QWEN_WRAPPER_TOKENS * len(tokens) + text_tokens(text_chars, chars_per_token)
    sequence = prompt + n * output_tokens
    return (
        visual,
        prompt,
        kv_bytes(sequence, bytes_per_token=bytes_per_token, block_size=block_size),
    )


# --- bodies -------------------------------------------------------------------------------------


def b64_image(width: int, height: int, image_format: str = "JPEG", **save: Any) -> str:
    return base64.b64encode(image_bytes(width, height, image_format, **save)).decode()


def chat(*parts: dict[str, Any], text: str = PROMPT, **fields: Any) -> dict[str, Any]:
    """A chat request whose one user message holds the text, then ``parts``."""
    content = [{"type": "text", "text": text}, *parts]
    return {"model": "m", "messages": [{"role": "user", "content": content}], **fields}


def image_url_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def responses(*parts: dict[str, Any], text: str = PROMPT, **fields: Any) -> dict[str, Any]:
    """A Responses request: one user message with ``input_text`` and ``input_image`` parts."""
    content = [{"type": "input_text", "text": text}, *parts]
    return {"model": "m", "input": [{"role": "user", "content": content}], **fields}


def messages(*blocks: dict[str, Any], text: str = PROMPT, **fields: Any) -> dict[str, Any]:
    """An Anthropic Messages request."""
    content = [{"type": "text", "text": text}, *blocks]
    fields.setdefault("max_tokens", 64)
    return {"model": "m", "messages": [{"role": "user", "content": content}], **fields}


def anthropic_base64(width: int, height: int, image_format: str = "JPEG") -> dict[str, Any]:
    media_type = f"image/{image_format.lower()}"
    source = {"type": "base64", "media_type": media_type, "data": b64_image(width, height)}
    return {"type": "image", "source": source}


def exif_rotated_jpeg(stored_width: int, stored_height: int) -> bytes:
    """A JPEG stored landscape with EXIF orientation 6: displayed portrait (sides swapped)."""
    exif = Image.Exif()
    exif[0x0112] = 6
    image = Image.linear_gradient("L").resize((stored_width, stored_height)).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif.tobytes())
    return buffer.getvalue()


def image_uris_in(node: Any) -> list[str]:
    """Every data URI or bare base64 image value in a parsed body, in document order."""
    found: list[str] = []
    if isinstance(node, dict):
        source = node.get("source")
        if node.get("type") == "image" and isinstance(source, dict) and "data" in source:
            found.append(source["data"])
        for value in node.values():
            found += image_uris_in(value)
    elif isinstance(node, list):
        for value in node:
            found += image_uris_in(value)
    elif isinstance(node, str) and node.startswith("data:image/"):
        found.append(node)
    return found


def reprobe(uri_or_base64: str) -> tuple[int, int, str]:
    """(width, height, format) of an image as vLLM will see it."""
    if uri_or_base64.startswith("data:"):
        header = probe_data_uri(uri_or_base64)
    else:
        header = probe_base64(uri_or_base64)
    return header.width_px, header.height_px, header.format


def webp_uri(width: int, height: int) -> str:
    return data_uri(image_bytes(width, height, "WEBP"), "image/webp")


def png_uri(width: int, height: int) -> str:
    return data_uri(image_bytes(width, height, "PNG"), "image/png")


def mask_images(node: Any) -> Any:
    """A parsed body with every inline image value replaced by ``"<image>"``."""
    if isinstance(node, dict):
        masked = {key: mask_images(value) for key, value in node.items()}
        source = node.get("source")
        if node.get("type") == "image" and isinstance(source, dict) and "data" in source:
            masked["source"] = {**source, "data": "<image>"}
        return masked
    if isinstance(node, list):
        return [mask_images(value) for value in node]
    if isinstance(node, str) and node.startswith("data:image/"):
        return "<image>"
    return node
