"""Test images made with Pillow or crafted by hand, base64 payloads, and request bodies that carry
them."""

from __future__ import annotations

import base64
import io
import struct
import zlib
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


# --- bodies -------------------------------------------------------------------------------------

PROMPT = "What is in the image?"


def chat(*parts: dict[str, Any], text: str = PROMPT, **fields: Any) -> dict[str, Any]:
    """A chat request whose one user message holds the text, then ``parts``."""
    content = [{"type": "text", "text": text}, *parts]
    return {"model": "m", "messages": [{"role": "user", "content": content}], **fields}


def chat_with_images(*image_urls: str, **fields: Any) -> dict[str, Any]:
    """A chat request whose one user message holds the prompt, then an image part per URL."""
    return chat(*(image_url_part(url) for url in image_urls), **fields)


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


# --- more images ----------------------------------------------------------------------------------


def b64_image(width: int, height: int, image_format: str = "JPEG", **save: Any) -> str:
    return base64.b64encode(image_bytes(width, height, image_format, **save)).decode()


def exif_rotated_jpeg(stored_width: int, stored_height: int) -> bytes:
    """A JPEG stored landscape with EXIF orientation 6: displayed portrait (sides swapped)."""
    exif = Image.Exif()
    exif[0x0112] = 6
    image = Image.linear_gradient("L").resize((stored_width, stored_height)).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif.tobytes())
    return buffer.getvalue()


def webp_uri(width: int, height: int) -> str:
    return data_uri(image_bytes(width, height, "WEBP"), "image/webp")


def png_uri(width: int, height: int) -> str:
    return data_uri(image_bytes(width, height, "PNG"), "image/png")


def png_chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data and CRC."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width`` x ``height`` (zero included, which PNG forbids) over a
    few bytes of pixel data: enough for a header probe, never for a decode."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\x00\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


def base64_text(raw: bytes) -> str:
    """Standard base64 with padding, as text."""
    return base64.b64encode(raw).decode()


# A 3x2 PNG header whose strict base64 ends in "==", and the ways vLLM's strict decoder refuses
# a payload.
PNG_RAW = png_header(3, 2) + b"\x00" * ((1 - len(png_header(3, 2))) % 3)
PNG_PAYLOAD = base64_text(PNG_RAW)
BAD_BASE64 = {
    "line-break": PNG_PAYLOAD[:20] + "\n" + PNG_PAYLOAD[20:],
    "space": PNG_PAYLOAD[:8] + " " + PNG_PAYLOAD[8:],
    "star": "*" + PNG_PAYLOAD[1:],
    "url-safe-alphabet": PNG_PAYLOAD[:12] + "-_" + PNG_PAYLOAD[14:],
    "padding-in-the-middle": "QQ==" + PNG_PAYLOAD,
    "missing-padding": PNG_PAYLOAD.rstrip("="),
    "cut-group": PNG_PAYLOAD[:-1],
    "non-ascii": PNG_PAYLOAD[:8] + "é" + PNG_PAYLOAD[9:],
}
