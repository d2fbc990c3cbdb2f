"""Benchmark ``downscale_image`` against a plain Pillow decode, resize and encode.

The gate: a 4032x3024 photo JPEG (a phone camera's 12 MP), shrunk to the size Qwen2.5-VL's
rule picks for ``max_pixels=1,003,520``, must be at least 2x faster than ``Image.open().load()``
at full size, a resize with the same filter (Pillow's defaults otherwise) and the same encoder
settings, measured in the same run, the two alternating. The PNG and WebP rows are figures
only: neither format can be decoded at a reduced scale, so they show the overhead, if any.

Run: ``.venv/bin/python bench/downscale.py [--runs N]``; exits 1 when the JPEG speed-up is < 2.
"""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import PIL
from PIL import Image, ImageChops, ImageDraw

from sidecar.images.resize import PNG_COMPRESS_LEVEL, RESAMPLE, downscale_image
from sidecar.profiles import load_profile

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
MAX_PIXELS = 1_003_520
REQUIRED_SPEED_UP = 2.0


def photo(width: int, height: int) -> Image.Image:
    """Smooth light and colour, fractal detail and sensor noise: it compresses like a photo."""
    across = Image.linear_gradient("L").transpose(Image.Transpose.ROTATE_90).resize((width, height))
    down = Image.linear_gradient("L").resize((width, height))
    detail = Image.effect_mandelbrot((width, height), (-2.2, -1.2, 0.8, 1.2), 64)
    channels = []
    for base, sigma in ((across, 14), (down, 16), (detail, 18)):
        smooth = Image.blend(base, Image.radial_gradient("L").resize((width, height)), 0.3)
        channels.append(ImageChops.add(smooth, Image.effect_noise((width, height), sigma), 2, -64))
    return Image.merge("RGB", channels)


def screenshot(width: int, height: int) -> Image.Image:
    """Flat panels and lines of small glyph-like marks: what PNG usually carries."""
    image = Image.new("RGB", (width, height), (246, 247, 249))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width, 64), fill=(36, 41, 47))
    draw.rectangle((0, 64, 280, height), fill=(230, 233, 237))
    for row, y in enumerate(range(96, height - 24, 28)):
        for x in range(312, width - 40, 9 + row % 3):
            if (x * 7 + row * 13) % 11 > 2:
                draw.rectangle((x, y, x + 6, y + 12), fill=(30 + row % 5 * 20, 40, 60))
    return image


def encode(image: Image.Image, image_format: str, **save: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, image_format, **save)
    return buffer.getvalue()


def plain(raw: bytes, size: tuple[int, int], image_format: str, **save: Any) -> bytes:
    """The obvious way: decode everything, resize with the same filter, encode the same way."""
    image = Image.open(io.BytesIO(raw))
    image.load()
    resized = image.resize(size, RESAMPLE)
    return encode(resized, image_format, **save)


@dataclass(frozen=True)
class Case:
    name: str
    raw: bytes
    size: tuple[int, int]
    plain: Callable[[], bytes]
    gated: bool


def median_ms(first: Callable[[], object], second: Callable[[], object], runs: int) -> list[float]:
    """Median wall time of each, in ms; runs alternate so that both see the same machine load."""
    times: list[list[float]] = [[], []]
    for _ in range(runs):
        for index, work in enumerate((first, second)):
            started = time.perf_counter()
            work()
            times[index].append(time.perf_counter() - started)
    return [statistics.median(each) * 1000 for each in times]


def cases() -> list[Case]:
    rule = load_profile(QWEN).vision
    jpeg = encode(photo(4032, 3024), "JPEG", quality=90)
    jpeg_size = rule.downscale_size(4032, 3024, max_tokens=None, max_pixels=MAX_PIXELS)
    png = encode(screenshot(2560, 1600), "PNG")
    png_size = rule.downscale_size(2560, 1600, max_tokens=None, max_pixels=MAX_PIXELS)
    webp = encode(photo(4032, 3024), "WEBP", quality=90)
    return [
        Case(
            "JPEG 4032x3024 photo",
            jpeg,
            jpeg_size,
            lambda: plain(jpeg, jpeg_size, "JPEG", quality=90),
            gated=True,
        ),
        Case(
            "PNG 2560x1600 screenshot",
            png,
            png_size,
            lambda: plain(png, png_size, "PNG", compress_level=PNG_COMPRESS_LEVEL),
            gated=False,
        ),
        Case(
            "WebP 4032x3024 photo (lossy)",
            webp,
            jpeg_size,
            lambda: plain(webp, jpeg_size, "WEBP", quality=90, method=0),
            gated=False,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per figure (median)")
    runs = max(10, parser.parse_args().runs)
    print(f"Pillow {PIL.__version__}, median of {runs} runs, {QWEN} at max_pixels {MAX_PIXELS:,}")
    print()
    print("| source | MB in | target | downscale_image ms | plain Pillow ms | speed-up | KB out |")
    print("|---|---:|---|---:|---:|---:|---:|")
    failed = False
    for case in cases():
        out = downscale_image(case.raw, case.size)
        case.plain()  # warm both paths once
        ours_work = functools.partial(downscale_image, case.raw, case.size)
        ours, theirs = median_ms(ours_work, case.plain, runs)
        ratio = theirs / ours
        gate = f" (gate {REQUIRED_SPEED_UP:g}x)" if case.gated else ""
        print(
            f"| {case.name} | {len(case.raw) / 1e6:.2f} | {case.size[0]}x{case.size[1]} "
            f"| {ours:.1f} | {theirs:.1f} | {ratio:.2f}x{gate} | {len(out.data) / 1e3:.0f} |"
        )
        failed |= case.gated and ratio < REQUIRED_SPEED_UP
    if failed:
        print(f"\nFAIL: the JPEG speed-up is below {REQUIRED_SPEED_UP:g}x", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
