"""The ``vlm-sidecar`` command line: serve, tokens, plan, demo, replay and advise.

``tokens --json`` is a public contract: one JSON object per input and line, with the keys
``input, width, height, tokens, wrapper_tokens, kv_bytes`` or, for an input the model
refuses, ``input, error``; the exit status is 1 when any input failed.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TextIO

import orjson
from pydantic import ValidationError

from sidecar.cli import advise
from sidecar.cli.capacity import DEFAULT_CAPPED_MAX_PIXELS, Workload, make_plan
from sidecar.cli.demo import run_demo
from sidecar.cli.hardware_args import add_hardware_arguments, hardware_from_arguments
from sidecar.cli.tables import print_plan, print_tokens_table
from sidecar.engine.measured import MeasuredRule, measure_sizes
from sidecar.errors import ConfigurationError, ImageError
from sidecar.images.probe import probe_path
from sidecar.observe.log import configure_logging
from sidecar.profiles import ModelProfile, ProfileOverrides, load_profile
from sidecar.serve.server import event_loop_runner, serve_until_signalled
from sidecar.settings import Settings
from sidecar.units import format_bytes

_SIZE = re.compile(r"^(\d+)[xX](\d+)$")
Size = tuple[int, int]


def parse_size(text: str) -> tuple[int, int]:
    """``"4032x3024"`` -> ``(4032, 3024)``."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}")
    return int(match.group(1)), int(match.group(2))


def _add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="built-in Hugging Face id or model dir")
    parser.add_argument("--min-pixels", type=int, help="as vLLM's --mm-processor-kwargs")
    parser.add_argument("--max-pixels", type=int, help="as vLLM's --mm-processor-kwargs")
    parser.add_argument(
        "--mm-processor-kwargs",
        type=_json_object,
        default={},
        help="as vLLM's: a JSON object of the family's knobs, e.g. '{\"max_soft_tokens\": 560}'",
    )
    parser.add_argument("--kv-cache-dtype", default="auto", help="as vLLM's --kv-cache-dtype")
    parser.add_argument(
        "--block-size", type=int, default=None, help="vLLM KV block, tokens (default: vLLM's)"
    )
    states = ["auto", "float32", "float16", "bfloat16"]
    parser.add_argument("--mamba-cache-dtype", default="auto", choices=states, help="as vLLM's")
    parser.add_argument("--mamba-ssm-cache-dtype", default="auto", choices=states, help="as vLLM's")
    parser.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="as vLLM's: hybrid models keep a state checkpoint per recurrent group",
    )
    parser.add_argument(
        "--gdn-prefill-backend",
        default="auto",
        help="as vLLM's: flashinfer (auto on Hopper) adds a checkpoint block per GDN group",
    )
    parser.add_argument(
        "--engine",
        metavar="URL",
        help="a running vLLM: price the sizes by its own /tokenize count instead of the rule",
    )
    parser.add_argument(
        "--pipeline-parallel-size",
        type=int,
        default=1,
        help="as vLLM's: KV figures are the busiest stage's, per GPU",
    )
    parser.add_argument(
        "--pipeline-layer-partition",
        type=_layer_counts,
        default=(),
        metavar="N,N,...",
        help="as vLLM's VLLM_PP_LAYER_PARTITION: decoder layers per stage",
    )
    parser.add_argument(
        "--data-parallel-size",
        type=int,
        default=1,
        help="as vLLM's: engines, each with the whole model and its own KV pool",
    )


def _profile(
    args: argparse.Namespace, *, tensor_parallel_size: int = 1, sizes: Sequence[Size] = ()
) -> ModelProfile:
    """The profile the flags describe; with ``--engine``, ``sizes`` priced by that vLLM."""
    profile = _rule_profile(args, tensor_parallel_size=tensor_parallel_size)
    if args.engine is None:
        return profile
    counts = measure_sizes(args.engine, sizes)
    return replace(profile, vision=MeasuredRule(profile.vision, counts, args.engine))


def _rule_profile(args: argparse.Namespace, *, tensor_parallel_size: int) -> ModelProfile:
    return load_profile(
        args.model,
        ProfileOverrides(
            min_pixels=args.min_pixels,
            max_pixels=args.max_pixels,
            mm_processor_kwargs=args.mm_processor_kwargs,
            kv_cache_dtype=args.kv_cache_dtype,
            tensor_parallel_size=tensor_parallel_size,
            block_size_tokens=args.block_size,
            pipeline_parallel_size=args.pipeline_parallel_size,
            pipeline_layer_partition=args.pipeline_layer_partition,
            mamba_cache_dtype=args.mamba_cache_dtype,
            mamba_ssm_cache_dtype=args.mamba_ssm_cache_dtype,
            prefix_caching=args.enable_prefix_caching,
            gdn_prefill_backend=args.gdn_prefill_backend,
        ),
        engine_only=args.engine is not None,  # a family with no rule: vLLM prices it
    )


def _json_object(text: str) -> dict[str, object]:
    """``'{"max_soft_tokens": 560}'``: vLLM's --mm-processor-kwargs value."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _layer_counts(text: str) -> tuple[int, ...]:
    """``13,15``: one count of decoder layers per pipeline stage."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated layer counts: {text!r}") from None
    if any(count < 0 for count in counts):
        raise argparse.ArgumentTypeError(f"layer counts cannot be negative: {text!r}")
    return counts


def _input_size(text: str) -> tuple[int, int]:
    match = _SIZE.match(text.strip())
    if match is not None:
        return int(match.group(1)), int(match.group(2))
    header = probe_path(text)
    return header.width_px, header.height_px


def run_tokens(args: argparse.Namespace, out: TextIO) -> int:
    """Print the visual tokens of each input; 1 if any input failed."""
    sizes: dict[str, Size | str] = {}
    for item in args.inputs:
        try:
            sizes[item] = _input_size(item)
        except (ImageError, OSError) as exc:
            sizes[item] = str(exc)
    measured = [size for size in sizes.values() if not isinstance(size, str)]
    profile = _profile(args, tensor_parallel_size=args.tensor_parallel_size, sizes=measured)
    rows: list[dict[str, object]] = []
    for item, size in sizes.items():
        try:
            if isinstance(size, str):
                raise OSError(size)
            width, height = size
            cost = profile.vision.image_tokens(width, height)
        except (ImageError, OSError) as exc:
            rows.append({"input": item, "error": str(exc)})
            continue
        rows.append(
            {
                "input": item,
                "width": width,
                "height": height,
                "tokens": cost.tokens,
                "wrapper_tokens": cost.wrapper_tokens,
                "kv_bytes": cost.tokens * profile.kv.bytes_per_token,
            }
        )
    if args.json:
        for row in rows:
            out.write(orjson.dumps(row).decode() + "\n")
    else:
        print_tokens_table(profile, rows, out, data_parallel_size=args.data_parallel_size)
    return 1 if any("error" in row for row in rows) else 0


def run_plan(args: argparse.Namespace, out: TextIO) -> int:
    """Print the capacity worksheet."""
    sizes = [("p50", args.image_size)]
    if args.p99_image_size is not None:
        sizes.append(("p99", args.p99_image_size))
    profile = _profile(args, sizes=[size for _, size in sizes])
    workloads = [
        (
            label,
            Workload(
                images_per_request=args.images,
                image_width_px=size[0],
                image_height_px=size[1],
                text_tokens=args.text_tokens,
                output_tokens=args.output_tokens,
                concurrency=args.concurrency,
            ),
        )
        for label, size in sizes
    ]
    hardware = hardware_from_arguments(
        args,
        max_num_batched_tokens=args.max_num_batched_tokens,
        pipeline_parallel_size=args.pipeline_parallel_size,
        data_parallel_size=args.data_parallel_size,
    )
    plan = make_plan(profile, workloads, hardware, capped_max_pixels=args.capped_max_pixels)
    if args.json:
        out.write(orjson.dumps(plan).decode() + "\n")
    else:
        print_plan(plan, hardware, out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(prog="vlm-sidecar", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    tokens = commands.add_parser("tokens", help="visual tokens and KV bytes per image")
    _add_profile_arguments(tokens)
    tokens.add_argument("--tensor-parallel-size", type=int, default=1, help="as vLLM's")
    tokens.add_argument("--json", action="store_true", help="one JSON object per line")
    tokens.add_argument("inputs", nargs="+", metavar="INPUT", help="WIDTHxHEIGHT or image file")

    plan = commands.add_parser("plan", help="the capacity worksheet")
    _add_profile_arguments(plan)
    plan.add_argument("--images", type=int, default=1, help="images per request")
    plan.add_argument("--image-size", type=parse_size, default=(1920, 1080), help="p50 WxH")
    plan.add_argument("--p99-image-size", type=parse_size, help="p99 WxH")
    plan.add_argument("--text-tokens", type=int, default=300)
    plan.add_argument("--output-tokens", type=int, default=500)
    plan.add_argument("--concurrency", type=int, default=32)
    add_hardware_arguments(plan, default_gpu_memory_gib=80.0)
    plan.add_argument("--max-num-batched-tokens", type=int)
    plan.add_argument("--capped-max-pixels", type=int, default=DEFAULT_CAPPED_MAX_PIXELS)
    plan.add_argument("--json", action="store_true")
    serve = commands.add_parser("serve", help="run the sidecar in front of vLLM")
    serve.add_argument(
        "--print-config", action="store_true", help="print the effective settings and exit"
    )

    demo = commands.add_parser("demo", help="the sidecar in front of a stand-in, on loopback")
    demo.add_argument("--port", type=int, default=8080)
    demo.add_argument("--metrics-port", type=int, default=9090)
    demo.add_argument("--once", action="store_true", help="exit after the workload")
    advise.add_parsers(commands)
    return parser


def load_settings() -> Settings:
    """``Settings`` from the environment; ConfigurationError names each bad variable."""
    try:
        return Settings()  # type: ignore[call-arg]  # values come from the environment
    except ValidationError as exc:
        problems = "; ".join(
            f"SIDECAR_{'_'.join(str(p) for p in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigurationError(f"invalid settings: {problems}") from None


def run_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Run the proxy until SIGTERM, or print its effective settings."""
    settings = load_settings()
    if args.print_config:
        profile = load_profile(settings.model, ProfileOverrides.from_settings(settings))
        effective = settings.model_dump(mode="json")
        out.write(orjson.dumps(effective, option=orjson.OPT_INDENT_2).decode() + "\n")
        out.write(f"# model profile: {profile.name} ({profile.vision.describe()}); ")
        out.write(f"KV per token {format_bytes(profile.kv.bytes_per_token)}\n")
        return 0
    configure_logging(settings.log_level, settings.log_format)
    with event_loop_runner() as runner:
        runner.run(serve_until_signalled(settings))
    return 0


def run_demo_command(args: argparse.Namespace, out: TextIO) -> int:
    """Run the demo; Ctrl-C ends it."""
    configure_logging("warning")
    with event_loop_runner() as runner:
        try:
            runner.run(
                run_demo(out, port=args.port, metrics_port=args.metrics_port, once=args.once)
            )
        except KeyboardInterrupt:
            out.write("\nstopped\n")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one subcommand; returns the exit status."""
    args = build_parser().parse_args(argv)
    stream = out or sys.stdout
    try:
        if args.command == "tokens":
            return run_tokens(args, stream)
        if args.command == "plan":
            return run_plan(args, stream)
        if args.command == "serve":
            return run_serve(args, stream)
        if args.command == "demo":
            return run_demo_command(args, stream)
        if args.command == "replay":
            return advise.run_replay(args, stream)
        if args.command == "advise":
            return advise.run_advise(args, stream)
    except ConfigurationError as exc:
        sys.stderr.write(f"vlm-sidecar: {exc}\n")
        return 2
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover
