"""The glibc allocator tuning that `vlm-sidecar serve` applies."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = "from sidecar.serve.allocator import tune_allocator; print(tune_allocator())"


def _run(env: dict[str, str]) -> str:
    result = subprocess.run(  # noqa: S603 - our own module, fixed argv
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, env=env
    )
    return result.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_tune_allocator_raises_glibc_thresholds_on_linux() -> None:
    assert _run({"PATH": "/usr/bin:/bin"}) == "True"


@pytest.mark.parametrize(
    "variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"]
)
def test_tune_allocator_leaves_an_operators_own_settings_alone(variable: str) -> None:
    value = "glibc.malloc.trim_threshold=1" if variable == "GLIBC_TUNABLES" else "1048576"
    assert _run({"PATH": "/usr/bin:/bin", variable: value}) == "False"
