"""images.resize: ``downscale_image`` gives exact sizes, applies vLLM's orientation once, decodes
within bounds and fails cleanly.

Every source is a real image made with Pillow (pillow-heif for the HEIF that vLLM
refuses). "What vLLM sees" is
rebuilt as vLLM builds it: ``exif_transpose``, then RGB with alpha composited on white.
"""

from __future__ import annotations

import functools
import io
import struct
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pillow_heif
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import (
    GifImagePlugin,
    Image,
    ImageChops,
    ImageCms,
    ImageFile,
    ImageOps,
    ImageStat,
    JpegImagePlugin,
)

from fuzz.images import animated_gif
from sidecar.errors import ImageError, ImageTooLargeError, NotAnImageError, TruncatedImageError
from sidecar.images.probe import probe_bytes
from sidecar.images.resize import DownscaledImage, downscale_image
from sidecar.profiles import load_profile
from sidecar.vision.qwen import QwenSmartResizeRule
from tests.support.fuzz_strategies import SEED_IMAGES
from tests.support.imaging import png_header

pillow_heif.register_heif_opener()  # only for the test's own view of HEIF sources

ORIENTATION = 0x0112
SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


# ----------------------------------------------------------------------------- images


@functools.cache
def photo(width: int, height: int, mode: str = "RGB") -> Image.Image:
    """Smooth content that every flip and rotation changes: R runs left-right, G top-bottom."""
    across = Image.linear_gradient("L").transpose(Image.Transpose.ROTATE_90).resize((width, height))
    down = Image.linear_gradient("L").resize((width, height))
    image = Image.merge("RGB", (across, down, Image.radial_gradient("L").resize((width, height))))
    if mode in ("RGBA", "LA"):
        image.putalpha(ImageChops.invert(down))
    return image.convert(mode)


def encode(image: Image.Image, image_format: str, **save: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, image_format, **save)
    return buffer.getvalue()


def with_orientation(orientation: int) -> Image.Exif:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    return exif


def animated(image_format: str, **save: Any) -> bytes:
    frames = [Image.new("RGB", (120, 80), colour) for colour in ("red", "blue", "green")]
    return encode(frames[0], image_format, save_all=True, append_images=frames[1:], **save)


def vllm_view(raw: bytes) -> Image.Image:
    """The pixels vLLM feeds its processor: frame 0, transposed, RGB over white."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(raw)))
    if image.has_transparency_data:
        rgba = image.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba).convert("RGB")
    return image.convert("RGB")


def mean_difference(first: Image.Image, second: Image.Image) -> float:
    stat = ImageStat.Stat(ImageChops.difference(first, second))
    return sum(stat.mean) / len(stat.mean)


def assert_is_the_source_resized(raw: bytes, out: DownscaledImage, tolerance: float = 4) -> None:
    expected = vllm_view(raw).resize((out.width_px, out.height_px), Image.Resampling.LANCZOS)
    assert mean_difference(vllm_view(out.data), expected) < tolerance


def assert_exact(out: DownscaledImage, target: tuple[int, int]) -> None:
    """The size is right by every reading, and nothing in the file would rotate it again."""
    reread = Image.open(io.BytesIO(out.data))
    assert (out.width_px, out.height_px) == target
    assert reread.size == target
    assert ImageOps.exif_transpose(reread).size == target
    assert ORIENTATION not in reread.getexif()
    assert "xmp" not in reread.info
    assert "XML:com.adobe.xmp" not in reread.info
    header = probe_bytes(out.data)
    assert (header.width_px, header.height_px) == target
    assert header.format == out.format


def heif(image: Image.Image, **save: Any) -> bytes:
    buffer = io.BytesIO()
    pillow_heif.from_pillow(image).save(buffer, format="HEIF", quality=90, **save)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- formats

SOURCES: dict[str, tuple[Callable[[], bytes], str, str]] = {
    # id: (source, output format, output mode)
    "jpeg-baseline": (lambda: encode(photo(400, 300), "JPEG", quality=95), "JPEG", "RGB"),
    "jpeg-progressive": (
        lambda: encode(photo(400, 300), "JPEG", quality=95, progressive=True),
        "JPEG",
        "RGB",
    ),
    "jpeg-cmyk": (
        lambda: encode(photo(400, 300).convert("CMYK"), "JPEG", quality=95),
        "JPEG",
        "RGB",
    ),
    "jpeg-grey": (lambda: encode(photo(400, 300, "L"), "JPEG", quality=95), "JPEG", "L"),
    "mpo": (
        lambda: encode(photo(400, 300), "MPO", save_all=True, append_images=[photo(40, 30)]),
        "JPEG",
        "RGB",
    ),
    "png-rgb": (lambda: encode(photo(400, 300), "PNG"), "PNG", "RGB"),
    "png-rgba": (lambda: encode(photo(400, 300, "RGBA"), "PNG"), "PNG", "RGBA"),
    "png-grey-alpha": (lambda: encode(photo(400, 300, "LA"), "PNG"), "PNG", "LA"),
    "png-palette": (lambda: encode(photo(400, 300, "P"), "PNG"), "PNG", "RGB"),
    "png-palette-transparent": (
        lambda: encode(photo(400, 300, "P"), "PNG", transparency=0),
        "PNG",
        "RGBA",
    ),
    "png-16-bit": (lambda: encode(photo(400, 300, "L").convert("I;16"), "PNG"), "PNG", "RGB"),
    "png-bilevel": (lambda: encode(photo(400, 300, "1"), "PNG"), "PNG", "L"),
    "png-bilevel-transparent": (
        lambda: encode(photo(400, 300, "1"), "PNG", transparency=0),
        "PNG",
        "LA",
    ),
    "webp-lossy": (lambda: encode(photo(400, 300), "WEBP", quality=95), "WEBP", "RGB"),
    "webp-lossless": (
        lambda: encode(photo(400, 300, "RGBA"), "WEBP", lossless=True),
        "WEBP",
        "RGBA",
    ),
    "gif-animated": (lambda: animated("GIF"), "PNG", "RGB"),
    "webp-animated": (lambda: animated("WEBP", lossless=True), "WEBP", "RGB"),
    "bmp": (lambda: encode(photo(400, 300), "BMP"), "PNG", "RGB"),
    "tiff": (lambda: encode(photo(400, 300), "TIFF"), "PNG", "RGB"),
    "avif": (lambda: encode(photo(400, 300), "AVIF", quality=95), "JPEG", "RGB"),
    "avif-alpha": (lambda: encode(photo(400, 300, "RGBA"), "AVIF", quality=95), "PNG", "RGBA"),
    "ico": (lambda: encode(photo(400, 300), "ICO", sizes=[(128, 96)]), "PNG", "RGB"),
    "jpeg2000": (lambda: encode(photo(400, 300), "JPEG2000"), "PNG", "RGB"),
    "tga": (lambda: encode(photo(400, 300), "TGA"), "PNG", "RGB"),
    "ppm": (lambda: encode(photo(400, 300), "PPM"), "PNG", "RGB"),
    "qoi": (lambda: encode(photo(400, 300), "QOI"), "PNG", "RGB"),
}


@pytest.mark.parametrize(("make", "output_format", "mode"), SOURCES.values(), ids=SOURCES.keys())
def test_downscale_gives_the_exact_size_in_the_chosen_format(
    make: Callable[[], bytes], output_format: str, mode: str
) -> None:
    raw = make()
    source = probe_bytes(raw)
    target = (source.width_px * 2 // 3 + 1, source.height_px // 3)

    out = downscale_image(raw, target)

    assert_exact(out, target)
    assert out.format == output_format
    assert out.media_type == f"image/{output_format.lower()}"
    assert Image.open(io.BytesIO(out.data)).mode == mode
    assert_is_the_source_resized(raw, out)


def test_downscale_keeps_lossless_webp_lossless_and_lossy_webp_lossy() -> None:
    lossless = downscale_image(SOURCES["webp-lossless"][0](), (200, 100))
    lossy = downscale_image(SOURCES["webp-lossy"][0](), (200, 100))

    assert lossless.data[12:16] == b"VP8L"
    assert lossy.data[12:16] == b"VP8 "


@pytest.mark.parametrize("image_format", ["GIF", "WEBP"], ids=["gif", "webp"])
def test_downscale_uses_frame_0_of_an_animation_as_vllm_does(image_format: str) -> None:
    out = downscale_image(animated(image_format), (60, 40))

    red = Image.open(io.BytesIO(out.data)).convert("RGB").getpixel((30, 20))
    assert isinstance(red, tuple)
    assert red[0] > 250 > 5 > max(red[1:])
    assert getattr(Image.open(io.BytesIO(out.data)), "n_frames", 1) == 1


def test_downscale_keeps_the_icc_profile_and_writes_baseline_jpeg() -> None:
    raw = encode(photo(400, 300), "JPEG", icc_profile=SRGB, progressive=True)

    reread = Image.open(io.BytesIO(downscale_image(raw, (200, 150)).data))

    assert reread.info.get("icc_profile") == SRGB
    assert "progressive" not in reread.info
    assert "progression" not in reread.info


def test_downscale_drops_a_cmyk_profile_with_the_cmyk_colours() -> None:
    # Pillow cannot make a CMYK profile; any profile attached to CMYK pixels describes CMYK.
    raw = encode(photo(400, 300).convert("CMYK"), "JPEG", icc_profile=SRGB)

    reread = Image.open(io.BytesIO(downscale_image(raw, (200, 150)).data))

    assert reread.mode == "RGB"
    assert "icc_profile" not in reread.info


def test_downscaled_image_data_uri_carries_media_type_and_base64_payload() -> None:
    out = downscale_image(encode(photo(40, 30), "PNG"), (20, 15))

    assert out.data_uri().startswith(b"data:image/png;base64,")
    assert probe_bytes(out.data).width_px == 20


def test_downscale_refuses_an_empty_target_as_a_programming_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        downscale_image(encode(photo(40, 30), "PNG"), (0, 15))


# ----------------------------------------------------------------------------- orientation


@pytest.mark.parametrize("orientation", range(1, 9), ids=[f"exif-{o}" for o in range(1, 9)])
def test_downscale_applies_exif_orientation_exactly_once(orientation: int) -> None:
    raw = encode(photo(400, 240), "JPEG", quality=95, exif=with_orientation(orientation))
    source = probe_bytes(raw)
    target = (source.width_px // 2, source.height_px // 2 + 1)

    out = downscale_image(raw, target)

    assert source.exif_orientation == orientation
    assert_exact(out, target)
    assert_is_the_source_resized(raw, out)


ORIENTED = {
    "png-exif": lambda: encode(photo(400, 240), "PNG", exif=with_orientation(6)),
    "webp-exif": lambda: encode(photo(400, 240), "WEBP", quality=95, exif=with_orientation(8)),
    "tiff-exif": lambda: encode(photo(400, 240), "TIFF", exif=with_orientation(5)),
    "avif-exif": lambda: encode(photo(400, 240), "AVIF", quality=95, exif=with_orientation(6)),
    "jpeg-xmp": lambda: encode(
        photo(400, 240), "JPEG", quality=95, xmp=b'<x:xmpmeta tiff:Orientation="6"/>'
    ),
}


@pytest.mark.parametrize("make", ORIENTED.values(), ids=ORIENTED.keys())
def test_downscale_applies_orientation_from_every_place_vllm_reads_it(
    make: Callable[[], bytes],
) -> None:
    raw = make()
    source = probe_bytes(raw)
    target = (source.width_px // 2, source.height_px // 2)

    out = downscale_image(raw, target)

    assert source.width_px < source.height_px  # the probe sees the rotation too
    assert_exact(out, target)
    assert_is_the_source_resized(raw, out)


def test_downscale_puts_colours_on_their_display_sides_when_orientation_is_6() -> None:
    stored = Image.new("RGB", (200, 100), "red")
    stored.paste(Image.new("RGB", (100, 100), "blue"), (100, 0))
    raw = encode(stored, "JPEG", quality=95, exif=with_orientation(6))

    shown = ImageOps.exif_transpose(Image.open(io.BytesIO(downscale_image(raw, (50, 100)).data)))

    expected = ImageOps.exif_transpose(Image.open(io.BytesIO(raw)))
    for point in ((25, 20), (25, 80)):
        got, want = shown.getpixel(point), expected.getpixel((point[0] * 2, point[1] * 2))
        assert isinstance(got, tuple)
        assert isinstance(want, tuple)
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 16
    red_top, blue_bottom = shown.getpixel((25, 20)), shown.getpixel((25, 80))
    assert isinstance(red_top, tuple)
    assert isinstance(blue_bottom, tuple)
    assert red_top[0] > 200 > red_top[2]
    assert blue_bottom[2] > 200 > blue_bottom[0]


def test_downscale_follows_vllm_for_a_png_exif_chunk_after_the_pixels() -> None:
    raw = encode(photo(120, 60), "PNG", exif=with_orientation(6))
    chunks, pos = [], 8
    while pos < len(raw):
        (length,) = struct.unpack_from(">I", raw, pos)
        chunks.append(raw[pos : pos + 12 + length])
        pos += 12 + length
    exif = next(chunk for chunk in chunks if chunk[4:8] == b"eXIf")
    rest = [chunk for chunk in chunks if chunk is not exif]
    moved = raw[:8] + b"".join(rest[:-1]) + exif + rest[-1]  # ... IDAT, eXIf, IEND

    out = downscale_image(moved, (30, 60))

    assert_exact(out, (30, 60))
    assert_is_the_source_resized(moved, out)


# ----------------------------------------------------------------------------- decoding cost


@functools.cache
def big_jpeg(width: int = 4000, height: int = 3000, orientation: int = 1) -> bytes:
    return encode(photo(width, height), "JPEG", quality=90, exif=with_orientation(orientation))


class Spy:
    """Records the size Pillow decodes at, and whether it decoded at all."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[str] = []
        self.drafted: list[tuple[int, int]] = []
        self.loaded: list[tuple[int, int]] = []
        init, draft, load = (
            ImageFile.ImageFile.__init__,
            JpegImagePlugin.JpegImageFile.draft,
            ImageFile.ImageFile.load,
        )

        def spy_init(image: Any, *args: Any, **kwargs: Any) -> None:
            self.opened.append(type(image).__name__)
            init(image, *args, **kwargs)

        def spy_draft(image: Any, mode: Any, size: Any) -> Any:
            result = draft(image, mode, size)
            self.drafted.append(image.size)
            return result

        def spy_load(image: Any) -> Any:
            if image.tile:  # not yet decoded
                self.loaded.append(image.size)
            return load(image)

        monkeypatch.setattr(ImageFile.ImageFile, "__init__", spy_init)
        monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", spy_draft)
        monkeypatch.setattr(ImageFile.ImageFile, "load", spy_load)


def test_downscale_decodes_a_big_jpeg_at_a_reduced_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)

    out = downscale_image(big_jpeg(), (1148, 868))

    assert spy.drafted == [(2000, 1500)]
    assert spy.loaded == [(2000, 1500)]
    assert_exact(out, (1148, 868))


def test_downscale_drafts_in_stored_orientation_when_exif_rotates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = Spy(monkeypatch)

    out = downscale_image(big_jpeg(4000, 1000, orientation=6), (250, 1000))

    assert spy.drafted == [(1000, 250)]
    assert_exact(out, (250, 1000))


def test_downscale_decodes_a_jpeg_under_the_limit_when_a_draft_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = Spy(monkeypatch)

    out = downscale_image(big_jpeg(), (400, 300), max_decode_pixels=200_000)

    assert spy.loaded == [(500, 375)]
    assert_exact(out, (400, 300))


def webp_claiming(width: int, height: int) -> bytes:
    """A real extended WebP whose canvas header claims another size."""
    raw = bytearray(encode(photo(64, 64), "WEBP", exif=with_orientation(1)))
    assert raw[12:16] == b"VP8X"
    raw[24:30] = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return bytes(raw)


TOO_LARGE = {  # id: (source, target, limit, refused on the header before Pillow opens it)
    "png-header-100000x100000": (
        lambda: png_header(100_000, 100_000),
        (100, 100),
        None,
        True,
    ),
    "webp-canvas-5000x5000": (lambda: webp_claiming(5000, 5000), (100, 100), 10_000_000, True),
    "jpeg-even-at-1/8": (big_jpeg, (400, 300), 100_000, True),
    "jpeg-draft-for-this-target": (big_jpeg, (3000, 2250), 1_000_000, False),
}


@pytest.mark.parametrize(
    ("make", "target", "limit", "on_header"), TOO_LARGE.values(), ids=TOO_LARGE.keys()
)
def test_downscale_refuses_to_decode_more_than_the_limit(
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[], bytes],
    target: tuple[int, int],
    limit: int | None,
    on_header: bool,
) -> None:
    spy = Spy(monkeypatch)
    options = {} if limit is None else {"max_decode_pixels": limit}

    with pytest.raises(ImageTooLargeError, match="would decode to"):
        downscale_image(make(), target, **options)

    assert spy.loaded == []
    assert (spy.opened == []) is on_header


def test_downscale_drafts_a_30000_px_jpeg_instead_of_calling_it_a_bomb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = bytearray(encode(photo(16, 16), "JPEG"))
    sof = small.index(b"\xff\xc0")
    small[sof + 5 : sof + 9] = struct.pack(">HH", 30_000, 30_000)  # height, width
    spy = Spy(monkeypatch)

    out = downscale_image(bytes(small), (1000, 1000))  # libjpeg pads the missing scan data

    assert spy.loaded == [(3750, 3750)]
    assert_exact(out, (1000, 1000))


def test_downscale_decodes_only_frame_0_of_a_gif_with_thousands_of_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames_seen: list[int] = []
    seek = GifImagePlugin.GifImageFile.seek

    def recording_seek(self: GifImagePlugin.GifImageFile, frame: int) -> None:
        frames_seen.append(frame)
        seek(self, frame)

    monkeypatch.setattr(GifImagePlugin.GifImageFile, "seek", recording_seek)
    started = time.perf_counter()
    out = downscale_image(animated_gif(5000, (640, 480)), (320, 240))
    assert time.perf_counter() - started < 1.0
    assert (out.width_px, out.height_px) == (320, 240)
    assert set(frames_seen) <= {0}


# ----------------------------------------------------------------------------- errors


def corrupt_huffman_table(raw: bytes) -> bytes:
    at = raw.index(b"\xff\xc4") + 6  # inside the first DHT segment's code counts
    return raw[:at] + b"\xee" * 8 + raw[at + 8 :]


BROKEN = {
    "jpeg-truncated": (lambda: encode(photo(400, 300), "JPEG")[:3000], TruncatedImageError),
    "png-truncated": (lambda: encode(photo(400, 300), "PNG")[:2000], TruncatedImageError),
    "webp-truncated": (lambda: encode(photo(400, 300), "WEBP")[:500], TruncatedImageError),
    "gif-truncated": (lambda: encode(photo(400, 300), "GIF")[:5000], TruncatedImageError),
    "jpeg-corrupt-huffman-table": (
        lambda: corrupt_huffman_table(encode(photo(400, 300), "JPEG")),
        NotAnImageError,
    ),
    "heif-refused-as-vllm-refuses-it": (lambda: heif(photo(64, 64)), NotAnImageError),
    "not-an-image": (lambda: b"just some text, not pixels" * 10, NotAnImageError),
    "empty": (lambda: b"", NotAnImageError),
}


@pytest.mark.parametrize(("make", "error"), BROKEN.values(), ids=BROKEN.keys())
def test_downscale_reports_broken_data_as_an_image_error(
    make: Callable[[], bytes], error: type[Exception]
) -> None:
    with pytest.raises(error) as caught:
        downscale_image(make(), (100, 100))

    assert type(caught.value) is error
    assert caught.value.args[0]
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


# A case the fuzzers found (tests/fuzz/test_images.py), kept as a plain test.


def test_downscale_answers_a_jpeg_with_damaged_exif_with_an_image_error_under_w_error() -> None:
    raw = SEED_IMAGES["jpeg-exif"]
    entry = raw.index(b"\x01\x12\x00\x03\x00\x00\x00\x01")  # Orientation, SHORT, count 1
    damaged = raw[:entry] + b"\x01\x12\x00\x03\x00\x00\x00\x03" + raw[entry + 8 :]  # count 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Pillow warns "Truncated File Read"; -W error raises it
        with pytest.raises(ImageError):
            downscale_image(damaged, (8, 8))


# ----------------------------------------------------------------------------- properties


PROPERTY_SOURCES = {
    "jpeg": encode(photo(300, 200), "JPEG"),
    "jpeg-exif-6": encode(photo(300, 200), "JPEG", exif=with_orientation(6)),
    "png-rgba": encode(photo(300, 200, "RGBA"), "PNG"),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from(sorted(PROPERTY_SOURCES)), data=st.data())
def test_downscale_hits_any_target_no_larger_than_the_source(source: str, data: Any) -> None:
    raw = PROPERTY_SOURCES[source]
    header = probe_bytes(raw)
    target = (
        data.draw(st.integers(1, header.width_px), label="width"),
        data.draw(st.integers(1, header.height_px), label="height"),
    )

    assert_exact(downscale_image(raw, target), target)


def test_downscale_gives_identical_results_from_concurrent_threads() -> None:
    sources = [big_jpeg(), encode(photo(400, 300, "RGBA"), "PNG")] * 4
    targets = [(1148, 868), (200, 150)] * 4
    serial = [
        downscale_image(raw, target).data for raw, target in zip(sources, targets, strict=True)
    ]

    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(downscale_image, sources, targets))

    assert [out.data for out in threaded] == serial


# ----------------------------------------------------------------------------- Qwen


@functools.cache
def qwen() -> QwenSmartResizeRule:
    rule = load_profile("Qwen/Qwen2.5-VL-7B-Instruct").vision.rule
    assert isinstance(rule, QwenSmartResizeRule)
    return rule


QWEN_CASES = {
    "4032x3024-1280-tokens": (4032, 3024, 1, 1280),
    "1920x1080-256-tokens": (1920, 1080, 1, 256),
    "portrait-by-exif-1024-tokens": (4032, 3024, 6, 1024),
    "tall-800x2400-64-tokens": (800, 2400, 1, 64),
}


@pytest.mark.parametrize(
    ("width", "height", "orientation", "max_tokens"), QWEN_CASES.values(), ids=QWEN_CASES.keys()
)
def test_downscale_to_the_qwen_size_costs_exactly_the_planned_tokens(
    width: int, height: int, orientation: int, max_tokens: int
) -> None:
    rule = qwen()
    raw = big_jpeg(width, height, orientation)
    source = probe_bytes(raw)
    target = rule.downscale_size(
        source.width_px, source.height_px, max_tokens=max_tokens, max_pixels=None
    )

    reprobed = probe_bytes(downscale_image(raw, target).data)

    planned = rule.image_tokens(*target).tokens
    assert (reprobed.width_px, reprobed.height_px) == target
    assert rule.image_tokens(reprobed.width_px, reprobed.height_px).tokens == planned
    assert planned <= max_tokens
