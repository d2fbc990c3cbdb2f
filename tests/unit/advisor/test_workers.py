"""advisor.workers: work spread over forked processes gives the answers of a plain loop, in
order, and a worker's exception raised here; the CPUs counted are the ones this process may
use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sidecar.advisor.workers import available_cpus, fork_map


def _tagged(state: dict[str, int], item: int) -> tuple[int, int, int]:
    """The item, the state's value for it, and the process that worked it out."""
    return item, state["base"] + item, os.getpid()


def test_fork_map_returns_a_loops_results_in_order_from_other_processes() -> None:
    state = {"base": 1000}  # inherited by the workers, never pickled
    items = list(range(12))
    results = fork_map(_tagged, state, items, jobs=3)
    assert [(item, value) for item, value, _ in results] == [(i, 1000 + i) for i in items]
    assert os.getpid() not in {pid for _, _, pid in results}


@pytest.mark.parametrize(
    ("jobs", "items"), [(1, 5), (4, 1), (4, 0)], ids=["one-job", "one-item", "none"]
)
def test_fork_map_works_here_when_there_is_nothing_to_spread(jobs: int, items: int) -> None:
    results = fork_map(_tagged, {"base": 0}, list(range(items)), jobs=jobs)
    assert {pid for _, _, pid in results} <= {os.getpid()}
    assert [value for _, value, _ in results] == list(range(items))


def test_a_worker_error_reaches_the_caller() -> None:
    with pytest.raises(ZeroDivisionError):
        fork_map(lambda state, item: state // item, 6, [3, 2, 0, 1], jobs=2)


def test_available_cpus_follow_the_cgroup_quota(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    everything = available_cpus(tmp_path / "absent")
    assert everything >= 1
    cpu_max.write_text("max 100000\n")
    assert available_cpus(cpu_max) == everything
    cpu_max.write_text("150000 100000\n")  # one and a half CPUs: two workers
    assert available_cpus(cpu_max) == min(everything, 2)
    cpu_max.write_text("1000 100000\n")
    assert available_cpus(cpu_max) == 1
    cpu_max.write_text("garbled\n")
    assert available_cpus(cpu_max) == everything
