"""Image headers: one hand-written parser per common format, Pillow for the rest, and the dispatch.

Pillow is the oracle. The parsers exist because Pillow is too slow for a per-request probe
(``jpeg``, ``png``, ``gif``) or needs the whole file (``webp`` and ``avif``: Pillow hands it to
libwebp and libavif). Each mirrors what Pillow's plugin reads for frame 0 of a *valid* file:
the size as stored, the frame count where the header holds it, and the orientation
``ImageOps.exif_transpose`` would apply (``exif``). ``contract`` states what every parser
reads, returns and raises; ``pillow`` opens every other format vLLM opens, and anything a
parser refuses.

``read_stored_header`` is the dispatch the probe uses: the format is told by its signature,
as Pillow's plugins accept it (an ISO media file is AVIF by its brands); its parser runs, and
Pillow decides wherever the parser raises ``UsePillow`` or trips over a malformed field. Bytes
with no known signature go to Pillow's own sniffing, limited to vLLM 0.33's allow-list
(``ALLOWED_IMAGE_FORMATS``), so the probe accepts exactly the formats vLLM opens: TGA, PPM,
QOI, DDS and the others with no parser of their own among them, and EPS, WMF, HEIF and the
others outside the list refused, as vLLM refuses them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from PIL import TiffImagePlugin

from sidecar.errors import NotAnImageError, TruncatedImageError
from sidecar.images.headers.avif import AVIF_BRANDS, ftyp_brands, parse_avif
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow
from sidecar.images.headers.gif import parse_gif
from sidecar.images.headers.jpeg import parse_jpeg
from sidecar.images.headers.pillow import ALLOWED_IMAGE_FORMATS, pillow_header
from sidecar.images.headers.png import parse_png
from sidecar.images.headers.webp import parse_webp

SUPPORTED_FORMATS = ", ".join(ALLOWED_IMAGE_FORMATS)
GENERIC = "PILLOW"  # no signature of ours: Pillow's plugins, within vLLM's allow-list, decide

Parser = Callable[[ByteSource], StoredHeader]

PARSERS: dict[str, Parser] = {
    "JPEG": parse_jpeg,
    "PNG": parse_png,
    "GIF": parse_gif,
    "WEBP": parse_webp,
    "AVIF": parse_avif,
}

_SIGNATURES = (
    ("JPEG", b"\xff\xd8\xff", 0),
    ("PNG", b"\x89PNG\r\n\x1a\n", 0),
    ("GIF", b"GIF87a", 0),
    ("GIF", b"GIF89a", 0),
    ("WEBP", b"WEBP", 8),
    ("ISOBMFF", b"ftyp", 4),
    ("BMP", b"BM", 0),
    *(("TIFF", prefix, 0) for prefix in TiffImagePlugin.PREFIXES),
    ("ICO", b"\x00\x00\x01\x00", 0),
    ("PSD", b"8BPS", 0),
    ("JPEG2000", b"\xff\x4f\xff\x51", 0),
    ("JPEG2000", b"\x00\x00\x00\x0cjP  \r\n\x87\n", 0),
)
_AVIF_MAJOR_BRANDS = frozenset((b"avif", b"avis", b"mif1", b"msf1"))  # Pillow's AVIF _accept


def read_stored_header(source: ByteSource) -> StoredHeader:
    """The header of a non-empty image, by its parser where one mirrors it, else by Pillow."""
    kind = sniff(source)
    parser = PARSERS.get(kind)
    try:
        if parser is None:
            raise UsePillow
        return parser(source)
    except (UsePillow, struct.error, IndexError):  # Pillow decides anything a parser cannot
        return pillow_header(kind, source)


def sniff(source: ByteSource) -> str:
    """The format of an image by its signature, named as Pillow names it."""
    kind = _signature_kind(source.read(0, 16), source.size)
    return _isobmff_kind(source) if kind == "ISOBMFF" else kind


def _signature_kind(head: bytes, size: int) -> str:
    for kind, signature, at in _SIGNATURES:
        if head[at : at + len(signature)] == signature and (kind != "WEBP" or _is_webp(head)):
            return kind
    if size < 16 and len(head) >= 2 and _starts_a_signature(head):
        raise TruncatedImageError(f"the image is truncated: only {size} bytes were sent")
    return GENERIC


def _is_webp(head: bytes) -> bool:
    return head.startswith(b"RIFF") and head[12:15] == b"VP8"  # as Pillow's WebP _accept


def _starts_a_signature(head: bytes) -> bool:
    """Whether these few bytes are the start of some format's signature."""
    if head.startswith(b"RIFF") or (4 < len(head) < 8 and b"ftyp".startswith(head[4:])):
        return True
    return any(at == 0 and signature.startswith(head) for _, signature, at in _SIGNATURES)


def _isobmff_kind(source: ByteSource) -> str:
    """AVIF, as Pillow's AVIF plugin accepts it; HEIF and the rest are not vLLM's."""
    major, brands, _ = ftyp_brands(source)
    if major in _AVIF_MAJOR_BRANDS and brands & AVIF_BRANDS:
        return "AVIF"
    raise NotAnImageError(
        f"the ISO media file (brand {major.decode('latin-1')!r}) is not AVIF; vLLM 0.33 opens "
        f"no other ISO image format (HEIF/HEIC is not in its list: {SUPPORTED_FORMATS})"
    )
