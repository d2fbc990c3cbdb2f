"""How long the probe takes to refuse each image bomb, and how much Python memory it touches.

``python -m fuzz.bomb_timing`` prints one line per bomb: median and 99th-percentile time of
``probe_data_uri`` over the bomb carrying 8 MiB of junk after its end (a slice of bytes, as the
proxy passes it), and the ``tracemalloc`` peak of one call. ``tests/unit/images/test_probe.py``
asserts the bounds; this prints the real figures for ``docs/reliability.md``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass

from fuzz.images import BOMBS, animated_gif, padded
from sidecar.errors import ImageTooLargeError
from sidecar.images.probe import probe_data_uri

JUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class Timing:
    name: str
    payload_bytes: int
    median_seconds: float
    p99_seconds: float
    peak_bytes: int
    refused: bool


def measure(name: str, raw: bytes, repetitions: int) -> Timing:
    uri = memoryview(b"data:image/png;base64," + base64.b64encode(padded(raw, JUNK_BYTES)))
    elapsed: list[float] = []
    refused = False
    for _ in range(repetitions):
        started = time.perf_counter()
        try:
            probe_data_uri(uri)
        except ImageTooLargeError:
            refused = True
        elapsed.append(time.perf_counter() - started)
    tracemalloc.start()
    with contextlib.suppress(ImageTooLargeError):
        probe_data_uri(uri)
    peak_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    elapsed.sort()
    p99 = elapsed[min(len(elapsed) - 1, int(len(elapsed) * 0.99))]
    return Timing(name, len(uri), statistics.median(elapsed), p99, peak_bytes, refused)


def measure_all(repetitions: int) -> list[Timing]:
    cases = {name: make() for name, make in BOMBS.items()}
    cases["gif-640x480-5000-frames (not a bomb)"] = animated_gif(5000, (640, 480))
    return [measure(name, raw, repetitions) for name, raw in cases.items()]


def report(timings: list[Timing]) -> str:
    lines = [
        "| image | data URI | refused | median | p99 | tracemalloc peak |",
        "|---|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {t.name} | {t.payload_bytes / 2**20:.1f} MiB | {'yes' if t.refused else 'no'} "
        f"| {t.median_seconds * 1e6:.0f} µs | {t.p99_seconds * 1e6:.0f} µs "
        f"| {t.peak_bytes / 1024:.1f} KiB |"
        for t in timings
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    args = parser.parse_args()
    print(report(measure_all(args.repetitions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
