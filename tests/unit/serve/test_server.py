"""The interpreter settings `vlm-sidecar serve` applies once it has started."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc, sys
import sidecar.serve.app  # start-up's imports: what there is to freeze
before = sys.getswitchinterval(), gc.get_freeze_count()
from sidecar.serve.server import tune_interpreter_for_latency
tune_interpreter_for_latency()
print(*before, sys.getswitchinterval(), gc.get_freeze_count())
"""


def test_start_up_objects_are_frozen_and_threads_switch_every_millisecond() -> None:
    result = subprocess.run(  # noqa: S603 - our own module, fixed argv
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    )
    interval_before, frozen_before, interval_after, frozen_after = result.stdout.split()
    assert (float(interval_before), int(frozen_before)) == (0.005, 0)
    assert float(interval_after) == 0.001
    assert int(frozen_after) > 50_000  # aiohttp, pydantic, structlog, the sidecar's modules
