"""images.probe across vLLM 0.33's whole allow-list: it never refuses an image vLLM opens, and it
refuses what vLLM refuses.

The oracle is vLLM's call: ``Image.open(fp, formats=ALLOWED_IMAGE_FORMATS)``, then
``ImageOps.exif_transpose`` (which loads the pixels, so every file here really decodes). Every
format of the list has at least one real file: written by Pillow's own encoder wherever Pillow
can write the format (``Image.SAVE``), at an odd, non-square 37x23 where the format allows it;
the read-only formats are crafted byte by byte here, each after its plugin's ``_open`` and
decoder, with its layout in a comment. The refused formats are written by Pillow (EPS, PDF) or
pillow-heif (HEIF), or crafted (WMF, EMF, BUFR, GRIB, HDF5, MPEG).
"""

from __future__ import annotations

import functools
import io
import random
import struct
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import pillow_heif
import pytest
from PIL import Image, ImageOps, PsdImagePlugin, UnidentifiedImageError

from fuzz.images import padded
from sidecar.errors import ImageTooLargeError, NotAnImageError
from sidecar.images import headers
from sidecar.images.headers.pillow import ALLOWED_IMAGE_FORMATS
from sidecar.images.probe import (
    DEFAULT_MAX_IMAGE_PIXELS,
    SUPPORTED_FORMATS,
    ImageHeader,
    probe_base64,
    probe_bytes,
    probe_data_uri,
)
from tests.support.bombs import data_uri_bytes, forbid_pixels
from tests.support.imaging import base64_text, png_header

pillow_heif.register_heif_opener()  # so Pillow could open HEIF: vLLM's list still refuses it

W, H = 37, 23  # odd and non-square, so that a swapped or rounded side shows

# ----------------------------------------------------------------------------- test images


def _scene(width: int = W, height: int = H, mode: str = "RGB") -> Image.Image:
    """A deterministic picture with gradients in every channel."""
    ramp = Image.linear_gradient("L").resize((width, height))
    ring = Image.radial_gradient("L").resize((width, height))
    rgb = Image.merge("RGB", (ramp, ring, ramp.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))
    if mode == "RGBA":
        rgba = rgb.convert("RGBA")
        rgba.putalpha(ring)
        return rgba
    return rgb if mode == "RGB" else rgb.convert(mode)


def _encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(action="ignore", category=DeprecationWarning):
        image.save(buffer, fmt, **params)  # Pillow 13 deprecates IM, which vLLM still lists
    return buffer.getvalue()


def _pixels(count: int) -> bytes:
    """``count`` bytes of a repeating ramp: pixel data for the crafted files."""
    return bytes(i * 7 % 251 for i in range(count))


def _cur() -> bytes:
    # ICONDIR (reserved 0, type 2 = cursor, 1 entry), one 16-byte entry (width, height, colours,
    # reserved, hotspot x and y, data size, data offset 22), then a DIB: BITMAPINFOHEADER whose
    # height is doubled (XOR rows, then the AND mask's), 24-bit rows padded to 4 bytes, the mask.
    stride, mask_stride = (W * 3 + 3) // 4 * 4, (W + 31) // 32 * 4
    dib = (
        struct.pack("<IiiHHIIiiII", 40, W, 2 * H, 1, 24, 0, 0, 0, 0, 0, 0)
        + _pixels(stride * H)
        + b"\x00" * (mask_stride * H)
    )
    entry = struct.pack("<BBBBHHII", W, H, 0, 0, 1, 1, len(dib), 6 + 16)
    return struct.pack("<HHH", 0, 2, 1) + entry + dib


def _dcx() -> bytes:
    # Magic 0x3ADE68B1 (LE), then the page offsets (u32 LE, ending with 0), then the pages:
    # whole PCX files as Pillow writes them. Page 0, the one vLLM sees, is 37x23.
    pages = [_encode(_scene(), "PCX"), _encode(_scene(11, 7), "PCX")]
    at = 4 + 4 * (len(pages) + 1)
    offsets = []
    for page in pages:
        offsets.append(at)
        at += len(page)
    return struct.pack(f"<I{len(pages) + 1}I", 0x3ADE68B1, *offsets, 0) + b"".join(pages)


def _fits() -> bytes:
    # 80-character cards (SIMPLE = T, BITPIX, NAXIS, NAXIS1 = width, NAXIS2 = height, END) in a
    # header padded with spaces to 2880 bytes, then 8-bit pixels padded to 2880.
    cards = [
        b"SIMPLE  =                    T",
        b"BITPIX  =                    8",
        b"NAXIS   =                    2",
        b"NAXIS1  = %20d" % W,
        b"NAXIS2  = %20d" % H,
        b"END",
    ]
    header = b"".join(card.ljust(80) for card in cards).ljust(2880)
    return header + _pixels(W * H).ljust(2880, b"\0")


def _fli() -> bytes:
    # 128-byte FLC header (file size, magic 0xAF12, 1 frame, width, height, depth 8, flags 0,
    # speed; the reserved ranges zero), then one frame chunk (size, magic 0xF1FA, 1 sub-chunk,
    # 8 reserved bytes) holding one FLI_COPY sub-chunk (size, type 16) of raw 8-bit pixels.
    copy = struct.pack("<IH", 6 + W * H, 16) + _pixels(W * H)
    frame = struct.pack("<IHH8x", 16 + len(copy), 0xF1FA, 1) + copy
    header = struct.pack("<IHHHHHHI", 128 + len(frame), 0xAF12, 1, W, H, 8, 0, 70)
    return header.ljust(128, b"\0") + frame


def _ftex() -> bytes:
    # "FTEX", version, width, height, mipmap count, format count 1 (i32 LE each), one format
    # entry (1 = uncompressed RGB, data at 32), then the mipmap: its size (i32), RGB bytes.
    data = _pixels(W * H * 3)
    return (
        b"FTEX"
        + struct.pack("<5i", 0, W, H, 1, 1)
        + struct.pack("<2i", 1, 32)
        + struct.pack("<i", len(data))
        + data
    )


def _gbr() -> bytes:
    # GIMP brush v2 (u32 BE): header size (28 + name), version 2, width, height, depth 1 (grey),
    # "GIMP", spacing, the NUL-terminated name; then width x height 8-bit pixels.
    name = b"brush\0"
    header = struct.pack(">5I", 28 + len(name), 2, W, H, 1) + b"GIMP" + struct.pack(">I", 25)
    return header + name + _pixels(W * H)


def _imt() -> bytes:
    # IM Tools: "key value" text lines (width, height, pixel n8 = 8-bit grey), then a form feed,
    # then the raw pixels.
    return b"width %d\nheight %d\npixel n8\n\x0c" % (W, H) + _pixels(W * H)


def _iptc_field(record: int, dataset: int, data: bytes) -> bytes:
    return struct.pack(">BBBH", 0x1C, record, dataset, len(data)) + data


def _iptc() -> bytes:
    # A bare IPTC/NAA stream, fields 0x1C, record, dataset, u16 BE length, data: 3:60 (1 layer,
    # no component: grey), 3:20 width, 3:30 height, 3:120 compression 1 (raw), then 8:10 with
    # the pixels (Pillow decodes them as a PGM of that size).
    return (
        _iptc_field(3, 60, b"\x01\x00")
        + _iptc_field(3, 20, struct.pack(">H", W))
        + _iptc_field(3, 30, struct.pack(">H", H))
        + _iptc_field(3, 120, b"\x01")
        + _iptc_field(8, 10, _pixels(W * H))
    )


def _mcidas() -> bytes:
    # A 256-byte area directory of 64 i32 BE words (1-based as McIDAS numbers them): w2 = 4
    # (the magic, with w1 = 0), w9 lines, w10 elements, w11 bytes per element, w14 bands,
    # w15 line prefix 0, w34 data offset 256; then the 8-bit pixels.
    words = [0] * 64
    words[1], words[8], words[9], words[10], words[13], words[33] = 4, H, W, 1, 1, 256
    return struct.pack(">64i", *words) + _pixels(W * H)


def _pcd(orientation: int = 0) -> bytes:
    # Kodak Photo CD: 2048 bytes the plugin skips, then "PCD_" and the image pack information,
    # whose byte 1538 holds the orientation (0: landscape 768x512, 1 or 3: portrait); the
    # 768x512 base image at 96 x 2048 bytes, YCC: two rows of luma and one of chroma per
    # 2304-byte block. 768 KB, as every PCD: the plugin knows no other size.
    info = bytearray(b"PCD_".ljust(1539, b"\0"))
    info[1538] = orientation
    head = (b"\xff" * 2048 + bytes(info)).ljust(96 * 2048, b"\xff")
    return head + _pixels(768 * 512 * 3 // 2)


def _pixar() -> bytes:
    # 512-byte header: magic 80 E8 00 00, height and width (u16 LE) at 416 and 418, channel
    # description (14, 2) = RGB at 424; the pixels follow at 1024, RGB interleaved.
    header = bytearray(1024)
    header[:4] = b"\x80\xe8\x00\x00"
    struct.pack_into("<HH", header, 416, H, W)
    struct.pack_into("<HH", header, 424, 14, 2)
    return bytes(header) + _pixels(W * H * 3)


def _psd(width: int = W, height: int = H, layer_block: bytes = b"") -> bytes:
    # 26-byte header ("8BPS", version 1, 6 reserved, 3 channels, height, width, depth 8, mode 3
    # = RGB), empty colour mode data and image resources (u32 BE lengths 0), the layer and mask
    # section (its u32 length, then its contents), then the merged image: compression 0 (raw)
    # and one plane per channel.
    header = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, height, width, 8, 3)
    sections = struct.pack(">II", 0, 0) + struct.pack(">I", len(layer_block)) + layer_block
    return header + sections + b"\x00\x00" + _pixels(3 * width * height)


def _sun() -> bytes:
    # Sun raster, 8 u32 BE: magic 0x59A66A95, width, height, depth 24, data length, type 1
    # (standard, BGR), no colour map; rows padded to 16 bits.
    stride = (W * 24 + 15) // 16 * 2
    return struct.pack(">8I", 0x59A66A95, W, H, 24, stride * H, 1, 0, 0) + _pixels(stride * H)


def _xpm() -> bytes:
    # X11 pixmap: "/* XPM */", a C array whose first string is "width height colours
    # chars-per-pixel", one string per colour ("a c #rrggbb", "b c None"), one per row.
    rows = b"\n".join(b'"' + bytes(b"ab"[(x + y) % 2] for x in range(W)) + b'",' for y in range(H))
    return (
        b'/* XPM */\nstatic char *image[] = {\n"%d %d 2 1",\n"a c #ff8000",\n"b c None",\n' % (W, H)
        + rows
        + b"\n};\n"
    )


def _xvthumb() -> bytes:
    # XV thumbnail: "P7 332", comment lines, "width height 255", then 3-3-2 RGB palette bytes.
    head = b"P7 332\n#XVVERSION:Version 2.28\n#END_OF_COMMENTS\n%d %d 255\n" % (W, H)
    return head + _pixels(W * H)


def _plain_pnm(magic: bytes, maxval: bytes, sample: Callable[[int, int], bytes]) -> bytes:
    # Plain (ASCII) PBM, PGM and PPM: magic, a comment, width height, maxval, decimal samples.
    rows = (b" ".join(sample(x, y) for x in range(W)) for y in range(H))
    return b"%s\n# plain\n%d %d\n%s" % (magic, W, H, maxval) + b"\n".join(rows) + b"\n"


def _ico_with_png(png: bytes, directory_size: tuple[int, int]) -> bytes:
    # ICONDIR (reserved, type 1 = icon, 1 entry), one entry (width and height as bytes, 0 for
    # 256, colours, reserved, planes, bit count, data size, offset 22), then the PNG.
    entry = struct.pack("<BBBBHHII", *directory_size, 0, 0, 1, 32, len(png), 6 + 16)
    return struct.pack("<HHH", 0, 1, 1) + entry + png


# ----------------------------------------------------------------------------- the cases

# Where a file's header ends, when Pillow's lazy open reads further than the header (ICO decodes
# its icon, FTEX copies its mipmap, PSD reads a pad byte after its pixels, PCX seeks to a palette
# at the end of the file); otherwise it is as far as that open reads.
HeaderEnd = Callable[[bytes], int]


class Sample(NamedTuple):
    fmt: str  # the allow-list's name, which vLLM's call reports (upper-cased)
    make: Callable[[], bytes]
    size: tuple[int, int] = (W, H)  # as vLLM sees it
    written: bool = True  # by Pillow's own encoder; False: crafted here
    header_end: HeaderEnd | None = None


def _written(fmt: str, mode: str = "RGB", size: tuple[int, int] = (W, H), **params: Any) -> Sample:
    return Sample(fmt, lambda: _encode(_scene(*size, mode), fmt, **params), size)


def _crafted(
    fmt: str, make: Callable[[], bytes], size: tuple[int, int] = (W, H), **kwargs: Any
) -> Sample:
    return Sample(fmt, make, size, written=False, **kwargs)


def _ico_header_end(raw: bytes) -> int:
    """Through the directory and the chosen icon's header: a PNG up to IDAT, or a DIB's 40 bytes."""
    count: int = struct.unpack_from("<H", raw, 4)[0]
    entries = [struct.unpack_from("<BB10xI", raw, 6 + 16 * i) for i in range(count)]
    offset: int = max(entries, key=lambda entry: (entry[0] or 256) * (entry[1] or 256))[2]
    if raw.startswith(b"\x89PNG", offset):
        return raw.index(b"IDAT", offset) + 4
    return offset + 40


def _ico_directory_disagreeing() -> bytes:
    raw = bytearray(_encode(_scene(), "ICO", sizes=[(W, H)]))
    raw[6:8] = bytes((16, 16))  # the directory says 16x16: vLLM adopts the PNG's 37x23 on load
    return bytes(raw)


CASES: dict[str, Sample] = {
    # written by Pillow
    "avif-rgb": _written("AVIF"),
    "blp2-palette": _written("BLP", "P"),
    "blp1-palette": _written("BLP", "P", blp_version="BLP1"),
    "bmp-rgb": _written("BMP"),
    "bmp-1-bit": _written("BMP", "1"),
    "dds-rgb": _written("DDS"),
    "dds-grey": _written("DDS", "L"),
    "dds-dxt1": _written("DDS", pixel_format="DXT1"),
    "dds-dxt5-rgba": _written("DDS", "RGBA", pixel_format="DXT5"),
    "dib-rgb": _written("DIB"),
    "gif-palette": _written("GIF", "P"),
    # ICNS holds fixed square sizes, each resized from 37x23: Pillow opens the largest
    "icns-1024x1024": _written("ICNS")._replace(size=(1024, 1024)),
    "ico-png": _written("ICO", sizes=[(W, H)])._replace(header_end=_ico_header_end),
    "ico-png-two-sizes": _written("ICO", sizes=[(16, 10), (W, H)])._replace(
        header_end=_ico_header_end
    ),
    "ico-bmp": _written("ICO", sizes=[(W, H)], bitmap_format="bmp")._replace(
        header_end=_ico_header_end
    ),
    "ico-bmp-rgba": _written("ICO", "RGBA", sizes=[(W, H)], bitmap_format="bmp")._replace(
        header_end=_ico_header_end
    ),
    "im-rgb": _written("IM"),
    "im-grey": _written("IM", "L"),
    "jpeg-rgb": _written("JPEG"),
    "jpeg-grey": _written("JPEG", "L"),
    "jpeg2000-jp2": _written("JPEG2000"),
    "jpeg2000-codestream": _written("JPEG2000", no_jp2=True),
    "msp-1-bit": _written("MSP", "1"),
    "pcx-rgb": _written("PCX"),
    "pcx-1-bit": _written("PCX", "1"),
    "pcx-palette": _written("PCX", "P")._replace(header_end=lambda raw: 128),
    "png-rgba": _written("PNG", "RGBA"),
    "ppm-p6-rgb": _written("PPM"),
    "pgm-p5-grey": _written("PPM", "L"),
    "pgm-p5-16-bit": _written("PPM", "I;16"),
    "pbm-p4-1-bit": _written("PPM", "1"),
    "pfm-float": _written("PPM", "F"),
    "qoi-rgb": _written("QOI"),
    "qoi-rgba": _written("QOI", "RGBA"),
    "sgi-rgb": _written("SGI"),
    "sgi-grey": _written("SGI", "L"),
    "spider-float": _written("SPIDER", "F"),
    "tga-rgb": _written("TGA"),
    "tga-rle": _written("TGA", compression="tga_rle"),
    "tga-palette": _written("TGA", "P"),
    "tiff-rgb": _written("TIFF"),
    "webp-rgb": _written("WEBP"),
    "xbm-1-bit": _written("XBM", "1"),
    # crafted: Pillow writes these formats, not these variants
    "pbm-p1-plain": _crafted("PPM", lambda: _plain_pnm(b"P1", b"", lambda x, y: b"%d" % (x & 1))),
    "pgm-p2-plain": _crafted("PPM", lambda: _plain_pnm(b"P2", b"255\n", lambda x, y: b"%d" % x)),
    "ppm-p3-plain": _crafted(
        "PPM", lambda: _plain_pnm(b"P3", b"255\n", lambda x, y: b"%d %d 99" % (x * 6, y * 11))
    ),
    "ico-directory-disagrees-with-png": _crafted(
        "ICO", _ico_directory_disagreeing, header_end=_ico_header_end
    ),
    # crafted: Pillow cannot write these formats
    "cur-24-bit": _crafted("CUR", _cur),
    "dcx-2-pages": _crafted("DCX", _dcx),
    "fits-8-bit": _crafted("FITS", _fits),
    "fli-copy-chunk": _crafted("FLI", _fli),
    "ftex-rgb": _crafted("FTEX", _ftex, header_end=lambda raw: 36),
    "gbr-v2-grey": _crafted("GBR", _gbr),
    "imt-grey": _crafted("IMT", _imt),
    "iptc-raw-grey": _crafted("IPTC", _iptc),
    "mcidas-grey": _crafted("MCIDAS", _mcidas),
    "pcd-landscape": _crafted("PCD", _pcd, size=(768, 512)),
    "pcd-portrait": _crafted("PCD", lambda: _pcd(orientation=1), size=(512, 768)),
    "pixar-rgb": _crafted("PIXAR", _pixar),
    "psd-rgb": _crafted("PSD", _psd, header_end=lambda raw: 40),
    "sun-24-bit": _crafted("SUN", _sun),
    "xpm-2-colours": _crafted("XPM", _xpm),
    "xvthumb": _crafted("XVTHUMB", _xvthumb),
}
CASE_IDS = sorted(CASES)
PILLOW_CASE_IDS = [case for case in CASE_IDS if CASES[case].fmt not in headers.PARSERS]


@functools.cache
def _sample(case: str) -> bytes:
    return CASES[case].make()


def _vllm_view(raw: bytes) -> tuple[int, int, str]:
    """(width, height, format) as vLLM sees the image: frame 0 after exif_transpose (decoded).

    Pillow's warnings are not errors in vLLM (they are here, by pytest's configuration)."""
    with (
        warnings.catch_warnings(action="ignore"),
        Image.open(io.BytesIO(raw), formats=ALLOWED_IMAGE_FORMATS) as image,
    ):
        fmt = str(image.format)
        width, height = ImageOps.exif_transpose(image).size
    return width, height, fmt


def _seen(header: ImageHeader) -> tuple[int, int, str]:
    return header.width_px, header.height_px, header.format


class _ReadExtent(io.BytesIO):
    """A file that notes the furthest byte read from it."""

    extent = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.extent = max(self.extent, self.tell())
        return data

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.extent = max(self.extent, self.tell())
        return line


def _header_end(case: str) -> int:
    """Where the header ends: as far as the format's plugin reads to open the file lazily."""
    sample, raw = CASES[case], _sample(case)
    if sample.header_end is not None:
        return sample.header_end(raw)
    stream = _ReadExtent(raw)
    with warnings.catch_warnings(action="ignore"), Image.open(stream, formats=(sample.fmt,)):
        pass
    return stream.extent


# ----------------------------------------------------------------------------- what vLLM opens


def test_probe_formats_cover_every_format_in_vllms_list_written_wherever_pillow_writes_it() -> None:
    Image.init()
    assert {sample.fmt for sample in CASES.values()} == set(ALLOWED_IMAGE_FORMATS)
    written = {sample.fmt for sample in CASES.values() if sample.written}
    assert written == set(ALLOWED_IMAGE_FORMATS) & set(Image.SAVE)


@pytest.mark.parametrize("case", CASE_IDS)
def test_probe_formats_give_vllms_size_and_format_when_vllm_opens_the_file(case: str) -> None:
    sample, raw = CASES[case], _sample(case)
    seen = _vllm_view(raw)
    assert (seen[:2], seen[2].upper()) == (sample.size, sample.fmt)
    assert _seen(probe_bytes(raw)) == seen
    assert _seen(probe_base64(base64_text(raw))) == seen


PSD_LAYER_GARBAGE = {
    # the section's length is right; the layer info inside claims ~2 GB, then garbage
    "layer-info-length-garbage": struct.pack(">Ih", 0x7FFF_FFF0, 5)
    + random.Random(1).randbytes(60),
    # the layer info claims -3 layers (merged alpha), then 0xFF where their records would be
    "layer-count-garbage": struct.pack(">Ih", 40, -3) + b"\xff" * 38,
}


@pytest.mark.parametrize("garbage", PSD_LAYER_GARBAGE.values(), ids=PSD_LAYER_GARBAGE.keys())
def test_probe_formats_read_a_psd_whose_layer_block_is_corrupt_as_vllm_does(
    garbage: bytes,
) -> None:
    raw = _psd(layer_block=garbage)
    assert _vllm_view(raw) == (W, H, "PSD")  # vLLM decodes the merged image, never the layers
    with Image.open(io.BytesIO(raw), formats=ALLOWED_IMAGE_FORMATS) as image:
        assert isinstance(image, PsdImagePlugin.PsdImageFile)
        with pytest.raises((OSError, SyntaxError)):
            _ = image.n_frames  # the layers themselves are unreadable
    assert _seen(probe_bytes(raw)) == (W, H, "PSD")
    assert _seen(probe_base64(base64_text(raw))) == (W, H, "PSD")


# ----------------------------------------------------------------------------- what vLLM refuses


def _eps_minimal() -> bytes:
    return b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 37 23\n%%EndComments\nshowpage\n"


def _eps_dos_binary() -> bytes:
    # The DOS EPS binary header (magic C5 D0 D3 C6, PostScript offset 30 and length, no WMF or
    # TIFF preview, checksum FFFF), then PostScript as Pillow writes it.
    postscript = _encode(_scene(), "EPS")
    header = struct.pack("<IIIIIIIH", 0xC6D3D0C5, 30, len(postscript), 0, 0, 0, 0, 0xFFFF)
    return header + postscript


def _wmf_placeable() -> bytes:
    # Placeable header (key 9AC6CDD7, handle 0, bounding box in twips, 1440 twips per inch,
    # reserved, XOR checksum of the ten words before), METAHEADER (disk, 9 words, version 0x300,
    # size in words, 0 objects, largest record, 0), then the EOF record (3 words, function 0).
    head = struct.pack("<IHhhhhHI", 0x9AC6CDD7, 0, 0, 0, W * 20, H * 20, 1440, 0)
    checksum = functools.reduce(lambda a, b: a ^ b, (w for (w,) in struct.iter_unpack("<H", head)))
    return (
        head
        + struct.pack("<H", checksum)
        + struct.pack("<HHHIHIH", 1, 9, 0x300, 12, 0, 3, 0)
        + struct.pack("<IH", 3, 0)
    )


def _emf() -> bytes:
    # EMR_HEADER (type 1, size 88, bounds in pixels, frame in 0.01 mm, " EMF", version 1.0,
    # file size, 2 records, 1 handle, reserved, no description or palette, the reference
    # device in pixels and millimetres), then EMR_EOF (type 14, size 20).
    header = struct.pack(
        "<II4i4i4sIIIHHIIIiiii",
        *(1, 88, 0, 0, W - 1, H - 1, 0, 0, W * 26, H * 26, b" EMF", 0x10000, 108, 2, 1, 0),
        *(0, 0, 0, 1920, 1080, 508, 286),
    )
    return header + struct.pack("<IIIII", 14, 20, 0, 16, 20)


def _mpeg() -> bytes:
    # A sequence header: start code 000001B3, 12-bit width and height, aspect 1 and frame rate 3,
    # 18-bit bit rate (all ones: variable), marker, 10-bit VBV size, flags; then a GOP start code.
    size = bytes((W >> 4, (W & 15) << 4 | H >> 8, H & 255))
    return b"\x00\x00\x01\xb3" + size + b"\x13\xff\xff\xe0\x18" + b"\x00\x00\x01\xb8" + bytes(8)


class Refused(NamedTuple):
    make: Callable[[], bytes]
    pillow_format: str | None  # what Pillow identifies it as without vLLM's list, if anything


REFUSED: dict[str, Refused] = {
    "eps-written": Refused(lambda: _encode(_scene(), "EPS"), "EPS"),
    "eps-minimal-header": Refused(_eps_minimal, "EPS"),
    "eps-dos-binary-header": Refused(_eps_dos_binary, "EPS"),
    "wmf-placeable": Refused(_wmf_placeable, "WMF"),
    "emf": Refused(_emf, "WMF"),
    # "BUFR", the message length (3 bytes), edition 4, ..., "7777"
    "bufr": Refused(lambda: b"BUFR\x00\x00\x48\x04" + bytes(60) + b"7777", "BUFR"),
    # "GRIB", the message length (3 bytes), edition 1, ..., "7777"
    "grib": Refused(lambda: b"GRIB\x00\x00\x48\x01" + bytes(60) + b"7777", "GRIB"),
    # the HDF5 signature, then a version 0 superblock
    "hdf5": Refused(lambda: b"\x89HDF\r\n\x1a\n" + bytes(56), "HDF5"),
    "mpeg": Refused(_mpeg, "MPEG"),
    "heif": Refused(lambda: _encode(_scene(), "HEIF"), "HEIF"),
    "pdf": Refused(lambda: _encode(_scene(), "PDF"), None),
    "text-prose": Refused(lambda: b"The quick brown fox\njumps over the lazy dog.\n" * 5, None),
    "text-json": Refused(lambda: b'{"width": 37,\n "height": 23,\n "pixel": "n8"}\n', None),
    "text-random": Refused(
        lambda: "".join(
            random.Random(5).choices("abcdefghijklmnopqrstuvwxyz0123456789 :=*#\n", k=600)
        ).encode(),
        None,
    ),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_probe_formats_refuse_as_vllm_does_what_vllms_list_leaves_out(case: Refused) -> None:
    raw = case.make()
    if case.pillow_format is not None:  # Pillow knows the format: only vLLM's list refuses it
        with Image.open(io.BytesIO(raw)) as image:
            assert image.format == case.pillow_format
    with pytest.raises(UnidentifiedImageError):
        Image.open(io.BytesIO(raw), formats=ALLOWED_IMAGE_FORMATS)
    with pytest.raises(NotAnImageError) as refused:
        probe_bytes(raw)
    assert SUPPORTED_FORMATS in str(refused.value)
    with pytest.raises(NotAnImageError) as refused:
        probe_base64(base64_text(raw))
    assert SUPPORTED_FORMATS in str(refused.value)


# ----------------------------------------------------------------------------- header only


@pytest.mark.parametrize("case", CASE_IDS)
def test_probe_formats_never_decode_pixels_when_reading_the_header(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = _sample(case)
    payload = base64_text(raw)
    expected = (*CASES[case].size, _vllm_view(raw)[2])
    forbid_pixels(monkeypatch)  # any allocation, decode or load raises from here on
    assert _seen(probe_bytes(raw)) == expected
    assert _seen(probe_base64(payload)) == expected


@pytest.mark.parametrize("case", PILLOW_CASE_IDS)
def test_probe_formats_read_a_file_cut_right_after_its_header(case: str) -> None:
    raw = _sample(case)
    cut = _header_end(case)
    assert cut < len(raw), "the cut must drop pixel data"
    assert probe_bytes(raw[:cut]) == probe_bytes(raw)
    assert probe_base64(base64_text(raw[:cut])) == probe_bytes(raw)


def test_probe_formats_read_an_ico_icons_size_without_decoding_the_icon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pillow's IcoImageFile decodes its icon while opening; the probe must not (a PNG of 6
    # megapixels is a few KB).
    raw = _ico_with_png(_encode(Image.new("L", (3000, 2000)), "PNG"), (0, 0))
    assert _vllm_view(raw) == (3000, 2000, "ICO")  # vLLM adopts the PNG's size on decoding it
    forbid_pixels(monkeypatch)
    assert probe_bytes(raw) == ImageHeader(3000, 2000, "ICO")
    with pytest.raises(ImageTooLargeError, match="limit of 1,000,000"):
        probe_bytes(raw, max_image_pixels=1_000_000)


# ----------------------------------------------------------------------------- size limit


def _bomb(fmt: str, width: int, height: int) -> bytes:
    """Only a header, claiming ``width`` x ``height``."""
    if fmt == "TGA":  # id length, no colour map, type 2 (true colour), map spec, origin, size
        return struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, width, height, 24, 0x20)
    if fmt == "PPM":
        return b"P6\n%d %d\n255\n" % (width, height)
    if fmt == "SGI":  # magic 474, verbatim, 1 byte per channel, 3 dimensions, x, y, z = 3
        return struct.pack(">hBBHHHH", 474, 0, 1, 3, width, height, 3).ljust(512, b"\0")
    if fmt == "SUN":
        return struct.pack(">8I", 0x59A66A95, width, height, 24, 0, 1, 0, 0)
    if fmt == "QOI":  # magic, width, height (u32 BE), 3 channels, sRGB
        return b"qoif" + struct.pack(">IIBB", width, height, 3, 0)
    if fmt == "XVTHUMB":
        return b"P7 332\n#END_OF_COMMENTS\n%d %d 255\n" % (width, height)
    assert fmt == "ICO"  # an icon whose PNG claims the size (the directory cannot: 256 at most)
    return _ico_with_png(png_header(width, height), (0, 0))


BOMB_FORMATS = ["TGA", "PPM", "SGI", "SUN", "QOI", "XVTHUMB", "ICO"]
JUNK_BYTES = 1 << 20  # after each header: a probe that decoded the payload would show it
PEAK_BOUND_BYTES = 64 << 10


def _refuse_without_allocating(uri: bytes, max_image_pixels: int, match: str) -> None:
    with pytest.raises(ImageTooLargeError, match=match):
        probe_data_uri(memoryview(uri), max_image_pixels=max_image_pixels)  # imports, caches
    tracemalloc.start()
    try:
        with pytest.raises(ImageTooLargeError, match=match):
            probe_data_uri(memoryview(uri), max_image_pixels=max_image_pixels)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < PEAK_BOUND_BYTES


@pytest.mark.parametrize("fmt", BOMB_FORMATS)
def test_probe_formats_refuse_a_header_beyond_pillows_bomb_limit_as_vllm_does(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = padded(_bomb(fmt, 65535, 65535), JUNK_BYTES)  # 4.3 gigapixels
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(raw), formats=ALLOWED_IMAGE_FORMATS)
    uri = data_uri_bytes(raw)
    forbid_pixels(monkeypatch)
    _refuse_without_allocating(uri, DEFAULT_MAX_IMAGE_PIXELS, "limit")


@pytest.mark.parametrize("fmt", BOMB_FORMATS)
def test_probe_formats_refuse_a_header_over_max_image_pixels_without_allocating(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = padded(_bomb(fmt, 5000, 4000), JUNK_BYTES)  # 20 megapixels: Pillow would not mind
    assert probe_bytes(raw) == ImageHeader(5000, 4000, "XVThumb" if fmt == "XVTHUMB" else fmt)
    uri = data_uri_bytes(raw)
    forbid_pixels(monkeypatch)
    _refuse_without_allocating(uri, 10_000_000, "more than the limit of 10,000,000")
