"""Independent pieces of work over one large, read-only state, in forked processes.

``advise`` prices about two hundred candidates over the same traffic, each on its own, then
replays four in-flight budgets. Worker processes made by ``fork`` inherit the traffic as it
is in memory (copy-on-write: nothing is pickled) and send back only small results. Where
``fork`` does not exist, or one job is asked for, the work runs here, in order.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

State = TypeVar("State")
Item = TypeVar("Item")
Result = TypeVar("Result")

# Set only while a pool runs: what its forked workers inherit and call.
_inherited: tuple[Callable[[Any, Any], Any], Any] | None = None


def available_cpus(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPUs this process may use: its affinity set (a container's or ``taskset``'s, not
    the machine's count), and no more than a cgroup v2 CPU quota allows."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):  # no cgroup v2 here, or a line it cannot be
        pass
    return cpus


def fork_map(
    function: Callable[[State, Item], Result],
    state: State,
    items: Sequence[Item],
    jobs: int,
) -> list[Result]:
    """``[function(state, item) for item in items]``, spread over ``jobs`` forked processes;
    results in the items' order, and a worker's exception raised here."""
    if jobs <= 1 or len(items) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [function(state, item) for item in items]
    global _inherited  # how a forked worker is handed the state, with nothing pickled
    _inherited = (function, state)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(jobs, len(items)), mp_context=context) as pool:
            return list(pool.map(_call_inherited, items))
    finally:
        _inherited = None


def _call_inherited(item: Any) -> Any:
    if _inherited is None:  # a worker not made by fork_map's fork
        raise RuntimeError("fork_map's state was not inherited")
    function, state = _inherited
    return function(state, item)
