"""cli.hardware_args: the GPU flags ``plan`` and ``advise`` share, read into ``Hardware``."""

from __future__ import annotations

import argparse

import pytest

from sidecar.cli.capacity import Hardware
from sidecar.cli.hardware_args import add_hardware_arguments, hardware_from_arguments


def _parser(default_gpu_memory_gib: float | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_hardware_arguments(parser, default_gpu_memory_gib=default_gpu_memory_gib)
    return parser


def test_hardware_arguments_read_every_flag_into_hardware() -> None:
    args = _parser(None).parse_args(
        ["--gpu-memory-gib", "80", "--tensor-parallel-size", "4", "--gpu-memory-utilization",
         "0.9", "--overhead-gib", "2", "--weights-gib", "15.5"]
    )  # fmt: skip
    hardware = hardware_from_arguments(args, max_num_batched_tokens=8192, pipeline_parallel_size=2)
    assert hardware == Hardware(
        gpu_memory_gib=80.0,
        gpu_count=4,
        gpu_memory_utilization=0.9,
        overhead_gib_per_gpu=2.0,
        weights_gib=15.5,
        max_num_batched_tokens=8192,
        pipeline_parallel_size=2,
        data_parallel_size=1,
    )


def test_hardware_arguments_default_as_vllm_does_and_gpus_is_an_alias() -> None:
    args = _parser(80.0).parse_args(["--gpus", "2"])
    hardware = hardware_from_arguments(args)
    assert (hardware.gpu_memory_gib, hardware.gpu_count) == (80.0, 2)
    assert (hardware.gpu_memory_utilization, hardware.overhead_gib_per_gpu) == (0.92, 1.5)
    assert hardware.weights_gib is None  # parameters x dtype


def test_hardware_arguments_require_the_gpu_memory_where_there_is_no_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        _parser(None).parse_args([])
    assert "the following arguments are required: --gpu-memory-gib" in capsys.readouterr().err
