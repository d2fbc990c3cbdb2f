"""The GPU flags ``plan`` and ``advise`` share, and the ``Hardware`` they describe."""

from __future__ import annotations

import argparse

from sidecar.cli.capacity import Hardware


def add_hardware_arguments(
    parser: argparse.ArgumentParser, *, default_gpu_memory_gib: float | None
) -> None:
    """``--gpu-memory-gib`` (required where there is no default) and the per-GPU figures."""
    parser.add_argument(
        "--gpu-memory-gib",
        type=float,
        default=default_gpu_memory_gib,
        required=default_gpu_memory_gib is None,
    )
    parser.add_argument(
        "--gpus", "--tensor-parallel-size", type=int, default=1, help="tensor-parallel GPUs"
    )
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    parser.add_argument("--overhead-gib", type=float, default=1.5, help="per GPU")
    parser.add_argument("--weights-gib", type=float, help="default: parameters x dtype")


def hardware_from_arguments(
    args: argparse.Namespace,
    *,
    max_num_batched_tokens: int | None = None,
    pipeline_parallel_size: int = 1,
    data_parallel_size: int = 1,
) -> Hardware:
    """The ``Hardware`` of the flags above and of the ones only ``plan`` has."""
    return Hardware(
        gpu_memory_gib=args.gpu_memory_gib,
        gpu_count=args.gpus,
        gpu_memory_utilization=args.gpu_memory_utilization,
        overhead_gib_per_gpu=args.overhead_gib,
        weights_gib=args.weights_gib,
        max_num_batched_tokens=max_num_batched_tokens,
        pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size,
    )
