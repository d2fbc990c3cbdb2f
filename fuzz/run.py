"""``make fuzz``: every fuzzer at scale, then one summary; exits 1 when anything failed.

1. Hypothesis: ``tests/fuzz/test_*.py`` with ``FUZZ_EXAMPLES`` cases per test (body parser and
   image references, header probe, downscaler, and the whole HTTP path of a live sidecar).
   Cases are counted from Hypothesis's own statistics.
2. Atheris (coverage-guided, ``fuzz.targets``): the body parser, the probe and the downscaler,
   each from a seed corpus of real images and request bodies; crashes are saved to
   ``--artifacts``.
3. The bomb timings of ``fuzz.bomb_timing``.

``--quick`` runs a small sample of everything, to check the machinery.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from fuzz.bomb_timing import measure_all, report
from fuzz.images import BOMBS, seeds

ROOT = Path(__file__).resolve().parent.parent
HYPOTHESIS_FILES = (
    "tests/fuzz/test_body.py",
    "tests/fuzz/test_images.py",
    "tests/fuzz/test_http.py",
)
STATISTICS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid")
ATHERIS_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
ATHERIS_RUNS = {"body": 300_000, "probe": 200_000, "downscale": 30_000}


@dataclass(frozen=True)
class Result:
    fuzzer: str
    cases: int
    failures: int
    seconds: float


def run_hypothesis(examples: int) -> Result:
    env = {**os.environ, "FUZZ_EXAMPLES": str(examples)}
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=3600",
        "--hypothesis-show-statistics", *HYPOTHESIS_FILES,
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # noqa: S603 - our own interpreter and arguments
    seconds = time.perf_counter() - started
    counts = [tuple(map(int, found)) for found in STATISTICS.findall(done.stdout)]
    passing = sum(count[0] for count in counts)
    failing = sum(count[1] for count in counts)
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-20_000:] + done.stderr[-5_000:])
        failing = max(failing, 1)
    return Result(
        f"hypothesis ({len(HYPOTHESIS_FILES)} files)", passing + failing, failing, seconds
    )


def body_seeds() -> dict[str, bytes]:
    """One request body per route, each carrying an image; the first byte picks the route."""
    uri = "data:image/png;base64," + base64.b64encode(seeds()["png"]).decode()
    payload = base64.b64encode(seeds()["jpeg"]).decode()
    text = {"type": "text", "text": "What is in the image?"}
    bodies = [
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [text, {"type": "image_url", "image_url": {"url": uri}}],
                }
            ],
            "max_tokens": 8,
            "stream": True,
        },
        {"model": "m", "prompt": ["a", "b"], "max_tokens": 4, "n": 2},
        {
            "model": "m",
            "input": [{"role": "user", "content": [{"type": "input_image", "image_url": uri}]}],
            "max_output_tokens": 8,
        },
        {
            "model": "m",
            "system": "s",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/jpeg",
                                "data": payload,
                            },
                        }
                    ],
                }
            ],
            "max_tokens": 8,
        },
    ]
    return {f"route-{n}": bytes([n]) + orjson.dumps(body) for n, body in enumerate(bodies)}


def run_atheris(target: str, runs: int, corpus: Path, artifacts: Path) -> Result:
    command = [
        sys.executable, "-m", "fuzz.targets", target, f"-runs={runs}", "-seed=1",
        f"-artifact_prefix={artifacts}/{target}-", str(corpus),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603 - our own interpreter and arguments
    seconds = time.perf_counter() - started
    found = ATHERIS_DONE.search(done.stdout + done.stderr)
    cases = int(found[1]) if found else 0
    failures = 0 if done.returncode == 0 and found else 1
    if failures:
        sys.stdout.write((done.stdout + done.stderr)[-10_000:])
    return Result(f"atheris {target}", cases, failures, seconds)


def write_corpus(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (directory / name).write_bytes(raw)
    return directory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000, help="Hypothesis cases per test")
    parser.add_argument("--atheris-scale", type=float, default=1.0, help="times the default runs")
    parser.add_argument(
        "--artifacts",
        type=Path,
        default=Path(tempfile.gettempdir(), "vlm-sidecar-fuzz-artifacts"),
        help="where atheris saves crashing inputs",
    )
    parser.add_argument("--quick", action="store_true", help="a small sample of everything")
    args = parser.parse_args()
    if args.quick:
        args.examples, args.atheris_scale = 20, 0.01
    if importlib.util.find_spec("atheris") is None:
        sys.exit("atheris is not installed: .venv/bin/pip install 'atheris>=3.0' (a dev extra)")
    args.artifacts.mkdir(parents=True, exist_ok=True)

    results = [run_hypothesis(args.examples)]
    images = {**seeds(), **{name: make() for name, make in BOMBS.items()}}
    with tempfile.TemporaryDirectory(prefix="fuzz-corpus-") as scratch:
        corpora = {
            "body": write_corpus(Path(scratch, "body"), body_seeds()),
            "probe": write_corpus(Path(scratch, "probe"), images),
            "downscale": write_corpus(Path(scratch, "downscale"), seeds()),
        }
        for target, runs in ATHERIS_RUNS.items():
            scaled = max(100, int(runs * args.atheris_scale))
            results.append(run_atheris(target, scaled, corpora[target], args.artifacts))

    print("\n| fuzzer | cases | failures | seconds |\n|---|---:|---:|---:|")
    for result in results:
        print(f"| {result.fuzzer} | {result.cases:,} | {result.failures} | {result.seconds:.0f} |")
    total = sum(result.cases for result in results)
    failures = sum(result.failures for result in results)
    print(f"| **total** | **{total:,}** | **{failures}** | |")
    print("\nImage bombs, refused by the probe (8 MiB of junk after each file):\n")
    print(report(measure_all(50 if args.quick else 1000)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
