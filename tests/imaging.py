"""Test images made with Pillow, and request bodies that carry them."""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image


def image_bytes(width: int, height: int, image_format: str = "JPEG", **save: Any) -> bytes:
    """A gradient image of the given size, encoded."""
    mode = "RGBA" if image_format in ("PNG", "WEBP") and save.pop("alpha", False) else "RGB"
    image = Image.linear_gradient("L").resize((width, height)).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, image_format, **save)
    return buffer.getvalue()


def data_uri(raw: bytes, media_type: str = "image/jpeg") -> str:
    """``data:<media_type>;base64,<payload>``."""
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"


def jpeg_uri(width: int, height: int) -> str:
    """A JPEG of the given size as a data URI."""
    return data_uri(image_bytes(width, height))


def chat_body(
    *image_urls: str, text: str = "What is in the image?", **fields: Any
) -> dict[str, Any]:
    """A chat completion request with one user message carrying the images."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in image_urls]
    return {"model": "m", "messages": [{"role": "user", "content": parts}], **fields}
