"""The human-readable tables that ``vlm-sidecar tokens`` and ``plan`` print.

They are the default output; ``--json`` prints the same values for programs (see ``cli``).
Every value printed comes from the rows or the plan handed in: nothing here computes a
token count or a byte size, it only formats them.
"""

from __future__ import annotations

from typing import TextIO

from sidecar.cli.capacity import Hardware, Plan
from sidecar.profiles import ModelProfile
from sidecar.units import format_bytes


def print_tokens_table(
    profile: ModelProfile,
    rows: list[dict[str, object]],
    out: TextIO,
    *,
    data_parallel_size: int = 1,
) -> None:
    """The ``tokens`` rows as a readable table; a failed input shows its error."""
    out.write(f"model: {profile.name} ({profile.vision.describe()})\n")
    geometry = profile.kv
    out.write(f"KV per token: {format_bytes(geometry.bytes_per_token)}\n")
    if geometry.has_recurrent_state:
        state = geometry.request_kv_bytes(0)
        out.write(
            f"KV block: {geometry.block_tokens:,} tokens, {format_bytes(geometry.bytes_per_block)};"
            f" every request also holds {state // geometry.bytes_per_block} recurrent-state "
            f"blocks ({format_bytes(state)}) whatever its length\n"
        )
    split = geometry.tensor_parallel_size > 1 or geometry.pipeline_parallel_size > 1
    if split or data_parallel_size > 1:
        out.write(
            f"per GPU of the busiest stage: tensor parallel {geometry.tensor_parallel_size}, "
            f"pipeline stages of {'/'.join(map(str, geometry.stage_layers))} layers; "
            f"{data_parallel_size} data-parallel engine(s), each holding its own requests\n"
        )
    out.write("\n")
    header = f"{'input':<28} {'size':>11} {'tokens':>8} {'wrapper':>7} {'KV (image)':>12}"
    out.write(header + "\n" + "-" * len(header) + "\n")
    for row in rows:
        if "error" in row:
            out.write(f"{row['input']!s:<28} error: {row['error']}\n")
            continue
        size = f"{row['width']}x{row['height']}"
        kv = format_bytes(int(str(row["kv_bytes"])))
        out.write(
            f"{row['input']!s:<28} {size:>11} {row['tokens']:>8,} {row['wrapper_tokens']:>7} "
            f"{kv:>12}\n"
        )


def print_plan(plan: Plan, hardware: Hardware, out: TextIO) -> None:
    """The worksheet as a readable table, one column per size and pixel setting."""
    out.write(f"model: {plan.model}\n")
    out.write(
        f"GPUs: {hardware.gpu_count} x {hardware.gpu_memory_gib:g} GiB at "
        f"gpu_memory_utilization {hardware.gpu_memory_utilization:g}, "
        f"{hardware.overhead_gib_per_gpu:g} GiB fixed overhead per GPU\n"
    )
    if hardware.pipeline_parallel_size > 1 or hardware.data_parallel_size > 1:
        out.write(
            f"{hardware.total_gpus} GPUs in all: tensor parallel {hardware.gpu_count} x "
            f"pipeline parallel {hardware.pipeline_parallel_size} (stages of "
            f"{'/'.join(map(str, plan.stage_layers))} layers; figures per GPU of the busiest) "
            f"x data parallel {hardware.data_parallel_size} (in flight: one engine's share of "
            f"the concurrency; max concurrency: all engines); SIDECAR_KV_BUDGET_BYTES=auto "
            f"comes to {format_bytes(plan.auto_kv_budget_bytes)}\n"
        )
    out.write(
        f"weights per GPU: {format_bytes(plan.weights_bytes_per_gpu)}; "
        f"KV pool per GPU: {format_bytes(plan.kv_pool_bytes_per_gpu)}; "
        f"KV per token per GPU: {format_bytes(plan.kv_bytes_per_token)}; "
        f"KV block: {plan.kv_block_tokens:,} tokens, {format_bytes(plan.kv_bytes_per_block)} "
        f"per GPU; encoder cache: {format_bytes(plan.encoder_cache_bytes)}\n\n"
    )
    lines: list[tuple[str, list[str]]] = [
        ("max_pixels", [f"{r.max_pixels:,}" if r.max_pixels else "-" for r in plan.rows]),
        ("tokens per image", [f"{r.image_tokens:,} + {r.wrapper_tokens}" for r in plan.rows]),
        ("tokens per request", [f"{r.tokens_per_request:,}" for r in plan.rows]),
        ("KV tokens in flight", [f"{r.kv_tokens_in_flight:,}" for r in plan.rows]),
        ("KV per request", [format_bytes(r.kv_bytes_per_request) for r in plan.rows]),
        ("KV in flight", [format_bytes(r.kv_bytes_in_flight) for r in plan.rows]),
        ("fits", ["yes" if r.fits else "NO" for r in plan.rows]),
        ("max concurrency (KV)", [f"{r.max_concurrency:,}" for r in plan.rows]),
    ]
    width = max(16, *(len(r.label) for r in plan.rows))
    out.write(f"{'':<22}" + "".join(f"{r.label:>{width + 2}}" for r in plan.rows) + "\n")
    for name, cells in lines:
        out.write(f"{name:<22}" + "".join(f"{c:>{width + 2}}" for c in cells) + "\n")
    warnings = dict.fromkeys(w for r in plan.rows for w in r.warnings)
    for warning in warnings:
        out.write(f"\nwarning: {warning}")
    if warnings:
        out.write("\n")
