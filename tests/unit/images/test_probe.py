"""images.probe: sizes from header bytes only, checked against Pillow on real files.

The oracle is what vLLM does with an image: ``Image.open`` then ``ImageOps.exif_transpose``.
The oracle is vLLM 0.33's call: ``Image.open(formats=ALLOWED_IMAGE_FORMATS)``. Test images are
made with Pillow (pillow-heif for the HEIF files vLLM refuses), or crafted by hand where no
encoder writes the header in question (bombs, zero sizes, a GIF frame wider than its screen).
"""

from __future__ import annotations

import contextlib
import functools
import io
import random
import statistics
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pillow_heif
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps, UnidentifiedImageError

from fuzz.images import animated_gif, padded
from sidecar.errors import (
    EmptyImageError,
    ImageError,
    ImageTooLargeError,
    NotAnImageError,
    NotBase64Error,
    TruncatedImageError,
)
from sidecar.images import headers
from sidecar.images.data_uri import split_data_uri, validate_base64
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow
from sidecar.images.headers.pillow import ALLOWED_IMAGE_FORMATS
from sidecar.images.probe import (
    DEFAULT_MAX_IMAGE_PIXELS,
    ImageHeader,
    probe_base64,
    probe_bytes,
    probe_data_uri,
    probe_path,
)
from tests.support.bombs import BOMB_BYTES, data_uri_bytes, forbid_pixels
from tests.support.headers import encode, exif, frames, scene, xmp
from tests.support.imaging import BAD_BASE64, PNG_PAYLOAD, base64_text, png_chunk, png_header

pillow_heif.register_heif_opener()  # so the oracle could open HEIF: vLLM's list still refuses it

# ----------------------------------------------------------------------------- test images


def _gif_header(screen: tuple[int, int], frame: tuple[int, int]) -> bytes:
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", *screen, 0, 0, 0)
        + b","
        + struct.pack("<HHHHB", 0, 0, *frame, 0)
        + b"\x02\x02\x44\x01\x00;"
    )


def _jpeg_header(width: int, height: int) -> bytes:
    sof = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    sos = b"\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00"
    return (
        b"\xff\xd8"
        + b"\xff\xc0"
        + struct.pack(">H", len(sof) + 2)
        + sof
        + b"\xff\xda"
        + struct.pack(">H", len(sos) + 2)
        + sos
        + b"\x00" * 16
        + b"\xff\xd9"
    )


def _webp_vp8x_header(width: int, height: int) -> bytes:
    vp8x = (
        bytes((0, 0, 0, 0)) + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    )
    chunk = b"VP8X" + struct.pack("<I", len(vp8x)) + vp8x
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def _webp_vp8_header(width: int, height: int) -> bytes:
    frame = b"\x10\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 6
    chunk = b"VP8 " + struct.pack("<I", len(frame)) + frame
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def _bmp_header(width: int, height: int) -> bytes:
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + 4, 0, 0, 54) + info + b"\x00" * 4


def _psd(width: int, height: int) -> bytes:
    header = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, height, width, 8, 3)
    return header + b"\x00" * 12 + b"\x00\x00" + bytes(range(256)) * (3 * width * height // 256 + 1)


def _exif_with_thumbnail(orientation: int, filler_bytes: int) -> bytes:
    """EXIF with Orientation and a maker note in IFD0, then IFD1 pointing at a JPEG thumbnail."""
    thumbnail = encode(scene(160, 120), "JPEG", quality=95)
    maker_at = 8 + 30 + 30
    thumb_at = maker_at + filler_bytes
    ifd0 = (
        struct.pack("<H", 2)
        + struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
        + struct.pack("<HHII", 0x927C, 7, filler_bytes, maker_at)
        + struct.pack("<I", 8 + 30)
    )
    ifd1 = (
        struct.pack("<H", 2)
        + struct.pack("<HHII", 0x0201, 4, 1, thumb_at)
        + struct.pack("<HHII", 0x0202, 4, 1, len(thumbnail))
        + struct.pack("<I", 0)
    )
    filler = bytes(i * 7 % 251 for i in range(filler_bytes))
    return b"Exif\x00\x00II*\x00" + struct.pack("<I", 8) + ifd0 + ifd1 + filler + thumbnail


def _jpeg_with_big_metadata() -> bytes:
    """A 60 KB EXIF block with a thumbnail and a 180 KB ICC profile, all before the SOF."""
    return encode(
        scene(300, 200),
        "JPEG",
        exif=_exif_with_thumbnail(6, 50_000),
        icc_profile=bytes(i % 253 for i in range(180_000)),
    )


def _gif_frame_wider_than_screen() -> bytes:
    raw = bytearray(encode(scene(20, 5, "P"), "GIF"))
    raw[6:10] = struct.pack("<HH", 10, 3)  # frame 0 stays 20x5: Pillow widens the screen
    return bytes(raw)


def _png_with_exif_after_idat(orientation: int) -> bytes:
    raw = encode(scene(40, 20), "PNG")
    iend = raw.rindex(b"IEND") - 4
    return raw[:iend] + png_chunk(b"eXIf", exif(orientation)[6:]) + raw[iend:]


def _apng_with_default_image() -> bytes:
    frames = [scene(30, 20) for _ in range(3)]
    return encode(frames[0], "PNG", save_all=True, append_images=frames[1:], default_image=True)


def _png_with_itxt_xmp() -> bytes:
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", xmp(8).decode())
    info.add_text("Software", "test")
    return encode(scene(40, 30), "PNG", pnginfo=info)


CASES: dict[str, Callable[[], bytes]] = {
    "jpeg-baseline-641x479": lambda: encode(scene(641, 479), "JPEG"),
    "jpeg-progressive-640x480": lambda: encode(scene(640, 480), "JPEG", progressive=True),
    "jpeg-cmyk-333x222": lambda: encode(scene(333, 222, "CMYK"), "JPEG"),
    "jpeg-grey-1x1": lambda: encode(scene(1, 1, "L"), "JPEG"),
    "jpeg-odd-3x1": lambda: encode(scene(3, 1), "JPEG", subsampling=0),
    "jpeg-60kb-exif-thumbnail-180kb-icc": _jpeg_with_big_metadata,
    "jpeg-xmp-orientation-6": lambda: encode(scene(64, 48), "JPEG", xmp=xmp(6)),
    "mpo-2-frames": lambda: frames("MPO", 2),
    "png-rgb-1x1": lambda: encode(scene(1, 1), "PNG"),
    "png-rgba-257x129": lambda: encode(scene(257, 129, "RGBA"), "PNG"),
    "png-palette-31x17": lambda: encode(scene(31, 17, "P"), "PNG", transparency=0),
    "png-grey-16-bit-129x85": lambda: encode(scene(129, 85, "I;16"), "PNG"),
    "png-1-bit-300x7": lambda: encode(scene(300, 7, "1"), "PNG"),
    "png-exif-orientation-6": lambda: encode(scene(40, 20), "PNG", exif=exif(6)),
    "png-itxt-xmp-orientation-8": _png_with_itxt_xmp,
    "apng-3-frames": lambda: frames("PNG", 3),
    "apng-default-image": _apng_with_default_image,
    "gif-1x1": lambda: encode(scene(1, 1, "P"), "GIF"),
    "gif-animated-3-frames": lambda: frames("GIF", 3, loop=0, comment=b"x" * 300),
    "gif-frame-wider-than-screen": _gif_frame_wider_than_screen,
    "webp-lossy-641x479": lambda: encode(scene(641, 479), "WEBP"),
    "webp-lossless-1x1": lambda: encode(scene(1, 1), "WEBP", lossless=True),
    "webp-alpha-257x129": lambda: encode(scene(257, 129, "RGBA"), "WEBP"),
    "webp-animated-3-frames": lambda: frames("WEBP", 3),
    "webp-exif-orientation-6": lambda: encode(scene(64, 48), "WEBP", exif=exif(6)),
    "webp-icc-xmp-orientation-5": lambda: encode(
        scene(64, 48), "WEBP", icc_profile=b"\x01" * 600, xmp=xmp(5)
    ),
    "bmp-rgb-641x479": lambda: encode(scene(641, 479), "BMP"),
    "bmp-palette-17x9": lambda: encode(scene(17, 9, "P"), "BMP"),
    "bmp-1-bit-1x1": lambda: encode(scene(1, 1, "1"), "BMP"),
    "tiff-rgb-201x99": lambda: encode(scene(201, 99), "TIFF"),
    "tiff-lzw-64x64": lambda: encode(scene(64, 64), "TIFF", compression="tiff_lzw"),
    "tiff-3-pages": lambda: frames("TIFF", 3),
    "avif-641x479": lambda: encode(scene(641, 479), "AVIF"),
    "avif-rgba-1x1": lambda: encode(scene(1, 1, "RGBA"), "AVIF"),
    "avif-animated-2-frames": lambda: frames("AVIF", 2),
    "avif-xmp-orientation-6": lambda: encode(scene(64, 48), "AVIF", xmp=xmp(6)),
    "ico-48x36": lambda: encode(scene(64, 48), "ICO"),
    "jpeg2000-codestream-65x33": lambda: encode(scene(65, 33), "JPEG2000", no_jp2=True),
    "jpeg2000-jp2-40x30": lambda: encode(scene(40, 30), "JPEG2000"),
    "psd-rgb-7x5": lambda: _psd(7, 5),
}
CASE_IDS = sorted(CASES)


@functools.cache
def _sample(case: str) -> bytes:
    return CASES[case]()


@functools.cache
def _vllm_view(raw: bytes) -> tuple[int, int, str]:
    """(width, height, format) as vLLM sees the image: frame 0 after exif_transpose."""
    with Image.open(io.BytesIO(raw), formats=ALLOWED_IMAGE_FORMATS) as image:
        fmt = str(image.format)
        width, height = ImageOps.exif_transpose(image).size
    return width, height, fmt


def _corrupt_base64(payload: str, byte_offset: int) -> str:
    """The payload with the 4-character group holding ``byte_offset`` made invalid."""
    at = byte_offset // 3 * 4
    return payload[:at] + "!!!!" + payload[at + 4 :]


# ----------------------------------------------------------------------------- what vLLM sees


@pytest.mark.parametrize("case", CASE_IDS)
def test_probe_matches_vllms_view_when_image_is_a_real_file(case: str) -> None:
    raw = _sample(case)
    header = probe_bytes(raw)
    assert (header.width_px, header.height_px, header.format) == _vllm_view(raw)


@pytest.mark.parametrize("case", CASE_IDS)
def test_probe_gives_one_answer_when_the_same_image_arrives_by_each_entry_point(
    case: str, tmp_path: Path
) -> None:
    raw = _sample(case)
    path = tmp_path / "image.bin"
    path.write_bytes(raw)
    payload = base64_text(raw)
    uri = f"data:image/whatever;base64,{payload}"
    answers = {
        probe_bytes(memoryview(raw)),
        probe_base64(payload),
        probe_base64(payload.encode()),
        probe_base64(memoryview(payload.encode())),
        probe_data_uri(uri),
        probe_data_uri(uri.encode()),
        probe_data_uri(memoryview(uri.encode())),
        probe_path(path),
    }
    assert answers == {probe_bytes(raw)}


@pytest.mark.parametrize("case", CASE_IDS)
def test_probe_fast_path_matches_pillows_plugin_when_image_is_a_real_file(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = _sample(case)
    fast = probe_bytes(raw)

    def refuse(source: ByteSource) -> StoredHeader:
        raise UsePillow

    monkeypatch.setattr(headers, "PARSERS", dict.fromkeys(headers.PARSERS, refuse))
    assert probe_bytes(raw) == fast


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF", "AVIF"])
@pytest.mark.parametrize("orientation", range(1, 9), ids=lambda o: f"orientation-{o}")
def test_probe_applies_exif_orientation_when_the_header_carries_it(
    fmt: str, orientation: int
) -> None:
    raw = encode(scene(64, 48), fmt, exif=exif(orientation))
    header = probe_bytes(raw)
    assert (header.width_px, header.height_px) == _vllm_view(raw)[:2]
    assert (header.width_px, header.height_px) == ((48, 64) if orientation >= 5 else (64, 48))
    assert header.exif_orientation == orientation


@pytest.mark.parametrize(
    ("case", "orientation"),
    [
        ("jpeg-60kb-exif-thumbnail-180kb-icc", 6),
        ("jpeg-xmp-orientation-6", 6),
        ("png-exif-orientation-6", 6),
        ("png-itxt-xmp-orientation-8", 8),
        ("webp-exif-orientation-6", 6),
        ("webp-icc-xmp-orientation-5", 5),
        ("avif-xmp-orientation-6", 6),
    ],
)
def test_probe_reports_the_orientation_when_exif_or_xmp_sets_it(
    case: str, orientation: int
) -> None:
    assert probe_bytes(_sample(case)).exif_orientation == orientation


@pytest.mark.xfail(reason="eXIf after IDAT is read by vLLM only after loading pixels", strict=True)
def test_probe_applies_orientation_when_png_exif_follows_the_pixel_data() -> None:
    raw = _png_with_exif_after_idat(6)
    header = probe_bytes(raw)
    assert (header.width_px, header.height_px) == _vllm_view(raw)[:2]


@pytest.mark.parametrize("case", ["heif-641x479", "heif-rgba-33x17"])
def test_probe_refuses_heif_as_vllm_does_though_pillow_heif_could_open_it(case: str) -> None:
    raw = encode(scene(641, 479) if "641" in case else scene(33, 17, "RGBA"), "HEIF")
    with Image.open(io.BytesIO(raw)) as image:  # pillow-heif registered: it opens
        assert image.size
    with pytest.raises(UnidentifiedImageError):
        Image.open(io.BytesIO(raw), formats=ALLOWED_IMAGE_FORMATS)  # vLLM's call refuses
    with pytest.raises(NotAnImageError, match="HEIF"):
        probe_bytes(raw)


def test_probe_widens_the_size_when_gif_frame_0_overflows_its_screen() -> None:
    header = probe_bytes(_sample("gif-frame-wider-than-screen"))
    assert (header.width_px, header.height_px) == (20, 5)


def test_probe_pixels_multiplies_width_by_height_when_asked() -> None:
    assert ImageHeader(641, 479, "JPEG").pixels == 641 * 479


# ----------------------------------------------------------------------------- header only


def test_probe_skips_big_metadata_when_base64_holds_garbage_inside_it() -> None:
    raw = _sample("jpeg-60kb-exif-thumbnail-180kb-icc")
    payload = base64_text(raw)
    thumbnail = raw.index(b"\xff\xd8", raw.index(b"Exif\x00\x00"))
    for offset in (raw.index(b"Exif\x00\x00") + 20_000, thumbnail, raw.index(b"ICC_") + 90_000):
        payload = _corrupt_base64(payload, offset)
    header = probe_data_uri("data:image/jpeg;base64," + payload)
    assert (header.width_px, header.height_px, header.exif_orientation) == (200, 300, 6)
    with pytest.raises(NotBase64Error):
        validate_base64(payload)


def test_probe_decodes_only_the_header_when_the_payload_tail_is_not_base64() -> None:
    raw = encode(Image.effect_noise((600, 400), 60).convert("RGB"), "JPEG", quality=95)
    payload = base64_text(raw)
    payload = payload[: len(payload) // 2] + "*" * (len(payload) - len(payload) // 2)
    assert probe_base64(payload) == probe_bytes(raw)
    with pytest.raises(NotBase64Error, match="character"):
        validate_base64(payload)


def test_probe_reads_far_segments_when_a_file_has_huge_metadata(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(_sample("jpeg-60kb-exif-thumbnail-180kb-icc"))
    assert probe_path(path) == ImageHeader(200, 300, "JPEG", 6)


def test_probe_releases_the_callers_buffer_when_given_views_of_a_bytearray() -> None:
    body = bytearray(f"data:image/png;base64,{base64_text(_sample('png-rgb-1x1'))}".encode())
    payload = memoryview(body)[22:]
    probe_data_uri(memoryview(body))
    probe_base64(payload)
    validate_base64(payload)
    with pytest.raises(NotAnImageError):
        probe_bytes(payload)
    payload.release()
    body.extend(b"more")  # a view still exported by the probe would raise BufferError here


def test_probe_raises_os_error_when_the_file_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        probe_path(tmp_path / "missing.png")


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("case", CASE_IDS)
def test_probe_raises_truncated_or_returns_the_header_when_the_file_is_cut(case: str) -> None:
    raw = _sample(case)
    full = probe_bytes(raw)
    cuts = sorted({*range(min(len(raw), 80)), *(len(raw) * k // 25 for k in range(1, 25))})
    for cut in cuts:
        try:
            header = probe_bytes(raw[:cut])
        except (TruncatedImageError, NotAnImageError):
            continue
        assert cut >= 16, f"a {cut}-byte prefix cannot hold a whole header"
        assert header == full, f"cut at {cut}"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xff",
        b"hello, world! " * 10,
        b"<!DOCTYPE html><html><body>Not found</body></html>",
        b"%PDF-1.7\n" + b"\x00" * 100,
        b"\x00" * 64,
        b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2",
        b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 40,
        random.Random(7).randbytes(1000),
    ],
    ids=["empty", "one-byte", "text", "html", "pdf", "zeros", "mp4", "wav", "random"],
)
def test_probe_raises_not_an_image_when_bytes_are_garbage(raw: bytes) -> None:
    with pytest.raises(NotAnImageError):
        probe_bytes(raw)


@pytest.mark.parametrize(
    "raw",
    [
        png_header(0, 10),
        png_header(10, 0),
        _gif_header((0, 0), (0, 0)),
        _jpeg_header(0, 8),
        _webp_vp8_header(0, 5),
    ],
    ids=["png-width-0", "png-height-0", "gif-0x0", "jpeg-0x8", "webp-vp8-0x5"],
)
def test_probe_raises_empty_image_when_the_header_claims_a_zero_side(raw: bytes) -> None:
    with pytest.raises(EmptyImageError, match="0"):
        probe_bytes(raw)


BOMBS = {
    "png-100000x100000": png_header(100_000, 100_000),
    "gif-65535x65535": _gif_header((65535, 65535), (1, 1)),
    "jpeg-65535x65535": _jpeg_header(65535, 65535),
    "webp-100000x100000": _webp_vp8x_header(100_000, 100_000),
    "bmp-100000x100000": _bmp_header(100_000, 100_000),
}


@pytest.mark.parametrize("raw", BOMBS.values(), ids=BOMBS.keys())
def test_probe_rejects_a_bomb_from_its_header_when_it_claims_too_many_pixels(raw: bytes) -> None:
    pillow_limit = Image.MAX_IMAGE_PIXELS
    uri = "data:image/png;base64," + base64_text(raw)
    elapsed_ns = []
    for _ in range(25):
        started = time.perf_counter_ns()
        with pytest.raises(ImageTooLargeError, match="more than the limit"):
            probe_data_uri(uri)
        elapsed_ns.append(time.perf_counter_ns() - started)
    assert statistics.median(elapsed_ns) < 500_000
    assert pillow_limit == Image.MAX_IMAGE_PIXELS


def test_probe_rejects_an_avif_bomb_when_its_ispe_claims_too_many_pixels() -> None:
    raw = bytearray(_sample("avif-641x479"))
    ispe = raw.index(b"ispe")
    raw[ispe + 8 : ispe + 16] = struct.pack(">II", 100_000, 100_000)
    with pytest.raises(ImageTooLargeError):
        probe_bytes(bytes(raw))


def test_probe_maps_pillows_bomb_error_when_the_pillow_path_meets_a_bomb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(headers.PARSERS, "GIF", _use_pillow)
    with pytest.raises(ImageTooLargeError):
        probe_bytes(_gif_header((1, 1), (65535, 65535)))


def _use_pillow(source: ByteSource) -> StoredHeader:
    raise UsePillow


def test_probe_returns_the_size_without_warning_when_above_pillows_warning_limit() -> None:
    header = probe_bytes(_bmp_header(10_000, 10_000))  # 1e8 px: Pillow would warn here
    assert header.pixels == 100_000_000


@pytest.mark.parametrize(
    ("size", "allowed"),
    [((10, 10), True), ((11, 10), False), ((1, 101), False)],
    ids=["at-the-limit", "one-column-over", "one-row-over"],
)
def test_probe_applies_the_configured_limit_when_max_image_pixels_is_set(
    size: tuple[int, int], *, allowed: bool
) -> None:
    raw = png_header(*size)
    if allowed:
        assert probe_bytes(raw, max_image_pixels=100).pixels == 100
    else:
        with pytest.raises(ImageTooLargeError, match="limit of 100"):
            probe_bytes(raw, max_image_pixels=100)


def test_probe_uses_vllms_pixel_limit_when_no_limit_is_given() -> None:
    assert DEFAULT_MAX_IMAGE_PIXELS == 178_956_970
    assert probe_bytes(png_header(13_377, 13_377)).pixels <= DEFAULT_MAX_IMAGE_PIXELS
    with pytest.raises(ImageTooLargeError):
        probe_bytes(png_header(13_377, 13_378))


@pytest.mark.parametrize("payload", BAD_BASE64.values(), ids=BAD_BASE64.keys())
def test_probe_raises_not_base64_when_the_decoded_prefix_is_not_strict(payload: str) -> None:
    with pytest.raises(NotBase64Error):
        probe_base64(payload)


# ----------------------------------------------------------------------------- data URLs


@pytest.mark.parametrize(
    "uri",
    [
        f"data:image/png;base64,{PNG_PAYLOAD}",
        f"DATA:image/png;base64,{PNG_PAYLOAD}",
        f"Data:;base64,{PNG_PAYLOAD}",
        f"data:text/plain;charset=utf-8;base64,{PNG_PAYLOAD}",
    ],
    ids=["plain", "upper-case-scheme", "no-media-type", "wrong-media-type-with-params"],
)
def test_probe_reads_the_payload_when_a_data_url_is_base64(uri: str) -> None:
    assert probe_data_uri(uri) == ImageHeader(3, 2, "PNG")


@pytest.mark.parametrize(
    "uri",
    [
        f"data:image/png,{PNG_PAYLOAD}",
        f"data:image/png;charset=utf-8,{PNG_PAYLOAD}",
        f"data:image/png;BASE64,{PNG_PAYLOAD}",
        f"data:image/png;base64{PNG_PAYLOAD}",
        f"https://example.com/{PNG_PAYLOAD}",
    ],
    ids=["no-base64", "other-param", "upper-case-base64", "no-comma", "not-a-data-url"],
)
def test_probe_raises_not_base64_when_a_data_url_is_not_base64(uri: str) -> None:
    with pytest.raises(NotBase64Error):
        probe_data_uri(uri)
    with pytest.raises(NotBase64Error):
        split_data_uri(uri.encode())


def test_probe_names_base64_as_the_fix_when_a_data_url_is_plain_text() -> None:
    with pytest.raises(NotBase64Error, match="only base64 data URLs are supported"):
        probe_data_uri("data:image/png,abc")


# ----------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_probe_raises_only_image_errors_when_bytes_are_random(raw: bytes) -> None:
    try:
        header = probe_bytes(raw)
    except ImageError:
        return
    assert min(header.width_px, header.height_px) > 0


@settings(max_examples=300, deadline=None)
@given(
    case=st.sampled_from(CASE_IDS),
    cut=st.floats(0, 1),
    at=st.integers(0, 400),
    splice=st.binary(max_size=8),
)
def test_probe_raises_only_image_errors_when_a_real_file_is_cut_or_mangled(
    case: str, cut: float, at: int, splice: bytes
) -> None:
    raw = _sample(case)
    mangled = (raw[:at] + splice + raw[at + len(splice) :])[: max(1, int(len(raw) * cut))]
    probes: list[Callable[[], ImageHeader]] = [
        functools.partial(probe_bytes, mangled),
        functools.partial(probe_base64, base64_text(mangled)),
    ]
    for probe_one in probes:
        try:
            header = probe_one()
        except ImageError:
            continue
        assert min(header.width_px, header.height_px) > 0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ABCDEFGHabcdefgh0123456789+/=\n -_*", max_size=200))
def test_probe_raises_only_image_errors_when_base64_is_random(payload: str) -> None:
    with contextlib.suppress(ImageError):
        probe_base64(payload)


# ----------------------------------------------------------------------------- bombs
# Each is refused from its header: fast (the median of many probes is under 1 ms; the real
# figure is in docs/reliability.md, the bound is loose so a busy machine does not fail), without
# a pixel buffer, and without decoding the payload (8 MiB of junk follows each bomb, and the
# Python memory the probe allocates, its tracemalloc peak, stays under 64 KiB).

JUNK_BYTES = 8 << 20
REPETITIONS = 300
MEDIAN_BOUND_SECONDS = 1e-3
PEAK_BOUND_BYTES = 64 << 10


@pytest.fixture
def no_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pixel allocation or decode raises ``PixelsAllocated``."""
    forbid_pixels(monkeypatch)


@pytest.mark.parametrize("bomb", BOMB_BYTES.values(), ids=BOMB_BYTES.keys())
def test_probe_refuses_a_bomb_from_its_header_in_under_a_millisecond(bomb: bytes) -> None:
    uri = memoryview(data_uri_bytes(padded(bomb, JUNK_BYTES)))
    elapsed: list[float] = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        with pytest.raises(ImageTooLargeError, match="more than the limit"):
            probe_data_uri(uri)
        elapsed.append(time.perf_counter() - started)
    assert statistics.median(elapsed) < MEDIAN_BOUND_SECONDS


@pytest.mark.usefixtures("no_pixels")
@pytest.mark.parametrize("bomb", BOMB_BYTES.values(), ids=BOMB_BYTES.keys())
def test_probe_refuses_a_bomb_without_a_pixel_buffer_or_decoding_its_payload(
    bomb: bytes,
) -> None:
    uri = data_uri_bytes(padded(bomb, JUNK_BYTES))
    assert len(uri) > 10 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ImageTooLargeError):
            probe_data_uri(memoryview(uri))
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < PEAK_BOUND_BYTES


@pytest.mark.parametrize("frame_count", [1, 5000], ids=["one-frame", "5000-frames"])
def test_probe_reads_only_frame_0_of_an_animated_gif_in_under_a_millisecond(
    frame_count: int,
) -> None:
    uri = memoryview(data_uri_bytes(animated_gif(frame_count, (640, 480)), "image/gif"))
    elapsed: list[float] = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        header = probe_data_uri(uri)
        elapsed.append(time.perf_counter() - started)
    assert (header.width_px, header.height_px) == (640, 480)
    assert statistics.median(elapsed) < MEDIAN_BOUND_SECONDS
