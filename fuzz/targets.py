"""Atheris fuzz targets: coverage-guided, on the parsers that read untrusted bytes.

Each target takes one input and fails (an uncaught exception, which atheris reports as a crash
and saves) when the code under test raises anything but the 400 it is meant to raise::

    body       parse_request_body on each route            InvalidRequestError only
    probe      probe_bytes and probe_base64, which agree   ImageError only
    downscale  downscale_image to 8x8 under a 4096 px cap  ImageError only, no buffer over the cap

Run one with ``python -m fuzz.targets TARGET [libFuzzer flags] [corpus dirs]``; ``fuzz.run``
runs them all with seeds. Warnings are errors here, as in the tests.
"""

from __future__ import annotations

import base64
import contextlib
import sys
import warnings
from collections.abc import Callable
from typing import Any

import atheris

with atheris.instrument_imports():
    from sidecar.body import refs, request_body
    from sidecar.errors import ImageError, InvalidRequestError
    from sidecar.images import headers, probe, resize
    from sidecar.routes import Route

from PIL import Image

INSTRUMENTED = (refs, headers)  # imported for coverage, called through the others
ROUTES = list(Route)
DOWNSCALE_LIMIT_PIXELS = 4096


class FuzzFailure(Exception):
    """A property the target checks did not hold."""


def body(data: bytes) -> None:
    if not data:
        return
    route = ROUTES[data[0] % len(ROUTES)]
    with contextlib.suppress(InvalidRequestError):
        request_body.parse_request_body(
            data[1:], route, policy=request_body.BodyPolicy(max_parts=64, max_depth=16)
        )


def probe_target(data: bytes) -> None:
    outcomes: list[Any] = []
    for attempt in (
        lambda: probe.probe_bytes(data),
        lambda: probe.probe_base64(base64.b64encode(data)),
    ):
        try:
            outcomes.append(attempt())
        except ImageError as exc:
            outcomes.append(type(exc))
    if outcomes[0] != outcomes[1]:
        raise FuzzFailure(f"the entry points disagree: {outcomes}")
    header = outcomes[0]
    if isinstance(header, probe.ImageHeader) and min(header.width_px, header.height_px) < 1:
        raise FuzzFailure(f"an empty size was accepted: {header}")


_allocated: list[tuple[int, int]] = []
_new = Image.core.new


def _recording_new(mode: str, size: tuple[int, int], *args: Any) -> Any:
    _allocated.append(size)
    return _new(mode, size, *args)


def downscale_target(data: bytes) -> None:
    _allocated.clear()
    with contextlib.suppress(ImageError):
        resize.downscale_image(data, (8, 8), max_decode_pixels=DOWNSCALE_LIMIT_PIXELS)
    over = [size for size in _allocated if size[0] * size[1] > DOWNSCALE_LIMIT_PIXELS]
    if over:
        raise FuzzFailure(f"pixel buffers over the limit: {over}")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "body": body,
    "probe": probe_target,
    "downscale": downscale_target,
}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in TARGETS:
        sys.exit(f"usage: python -m fuzz.targets {{{','.join(TARGETS)}}} [libFuzzer flags]")
    warnings.simplefilter("error")
    Image.core.new = _recording_new
    atheris.Setup([sys.argv[0], *sys.argv[2:]], TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
