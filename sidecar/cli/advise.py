"""``vlm-sidecar replay`` and ``advise``: recorded traffic under candidate settings.

Thin: read the traffic (a traffic log, or Prometheus' histograms), hand it to
``sidecar.advisor`` and print. ``replay --json`` prints one object; its keys ``requests``,
``decisions``, ``reasons`` and ``kv_bytes_per_request`` are a stable contract.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

import orjson

from sidecar.advisor.candidates import (
    candidate_settings,
    changed,
    parse_assignments,
    replay_notes,
)
from sidecar.advisor.chart import require_matplotlib, write_chart
from sidecar.advisor.prometheus import synthetic_traffic
from sidecar.advisor.recommend import advice_json, print_advice
from sidecar.advisor.records import TrafficLogContents, read_traffic_log
from sidecar.advisor.replay import priced_as_recorded, replay
from sidecar.advisor.report import print_report, summarize
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.advisor.sweep import advise
from sidecar.advisor.workers import available_cpus
from sidecar.cli.capacity import kv_pool_bytes_per_gpu
from sidecar.cli.hardware_args import add_hardware_arguments, hardware_from_arguments
from sidecar.errors import ConfigurationError
from sidecar.settings import Settings


def add_traffic_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the traffic comes from: a traffic log, or a Prometheus server."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--log", type=Path, help="SIDECAR_TRAFFIC_LOG file (FILE.1 read too)")
    source.add_argument("--prometheus", metavar="URL", help="Prometheus scraping the sidecar")
    parser.add_argument("--window", default="24h", help="with --prometheus: increase over it")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SIDECAR_NAME=VALUE",
        help="a candidate setting (repeatable); the rest are the recorded ones",
    )


def load_traffic(args: argparse.Namespace) -> tuple[TrafficLogContents, list[str]]:
    """The records, and notes on where they came from."""
    if args.log is not None:
        if not args.log.is_file():
            raise ConfigurationError(f"--log {args.log}: no such file")
        contents = read_traffic_log(args.log)
        notes = []
        if contents.skipped_lines:
            notes.append(f"{contents.skipped_lines:,} lines were not records and were skipped")
        return contents, notes
    return synthetic_traffic(args.prometheus, window=args.window)


def _settings(
    contents: TrafficLogContents, assignments: list[str], *, synthetic: bool
) -> tuple[Settings, Settings, dict[str, Any], TrafficLogContents]:
    """The base settings, the candidate, the changes; a synthetic traffic priced under the
    base as its "recorded" figures."""
    changes = parse_assignments(assignments)
    model = contents.records[0].model if contents.records else None
    base = candidate_settings(contents.settings, {}, model=model)
    if synthetic:
        records = priced_as_recorded(contents.records, Candidate(base))
        contents = TrafficLogContents(records, None, contents.headers, contents.skipped_lines)
    return base, candidate_settings(contents.settings, changes, model=model), changes, contents


def run_replay(args: argparse.Namespace, out: TextIO) -> int:
    """Replay the traffic under the candidate settings and report."""
    contents, notes = load_traffic(args)
    base, settings, changes, contents = _settings(contents, args.set, synthetic=not args.log)
    result = replay(contents.records, Candidate(settings))
    summary = summarize(contents.records, result, [*notes, *replay_notes(settings, changes)])
    summary["settings"] = changed(base, settings)
    if args.json:
        out.write(orjson.dumps(summary).decode() + "\n")
        return 0
    source = "recorded settings" if contents.settings is not None else "environment"
    changes_text = ", ".join(f"{k}={v}" for k, v in summary["settings"].items()) or "nothing"
    out.write(f"replay of {len(contents.records):,} requests; base: {source}; changed: ")
    out.write(f"{changes_text}\n")
    print_report(summary, out)
    return 0


def run_advise(args: argparse.Namespace, out: TextIO) -> int:
    """Sweep the budgets over the traffic and recommend settings."""
    if args.chart is not None:
        require_matplotlib()
    contents, notes = load_traffic(args)
    _, settings, _, contents = _settings(contents, args.set, synthetic=not args.log)
    if settings.tensor_parallel_size != args.gpus:
        settings = with_settings(settings, tensor_parallel_size=args.gpus)
        notes.append(f"KV per GPU priced for --gpus {args.gpus} (tensor parallel)")
    hardware = hardware_from_arguments(args)
    candidate = Candidate(settings)
    advice = advise(
        contents.records,
        settings,
        pool_bytes=kv_pool_bytes_per_gpu(candidate.profile, hardware),
        target_downscaled_fraction=args.target_downscaled_fraction,
        notes=notes,
        jobs=args.jobs,
    )
    if args.json:
        out.write(orjson.dumps(advice_json(advice)).decode() + "\n")
    else:
        print_advice(advice, out)
    if args.chart is not None:
        write_chart(advice, args.chart)
        if not args.json:
            out.write(f"\nchart: {args.chart}\n")
    return 0


MAX_DEFAULT_JOBS = 8  # each worker holds its own copy of what it touches


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def add_parsers(commands: Any) -> None:
    """Register ``replay`` and ``advise`` on the main parser's subcommands."""
    replay_parser = commands.add_parser("replay", help="recorded traffic under candidate settings")
    add_traffic_arguments(replay_parser)
    replay_parser.add_argument("--json", action="store_true", help="one JSON object")

    advise_parser = commands.add_parser("advise", help="recommend budgets from recorded traffic")
    add_traffic_arguments(advise_parser)
    add_hardware_arguments(advise_parser, default_gpu_memory_gib=None)
    advise_parser.add_argument(
        "--target-downscaled-fraction",
        type=float,
        default=0.1,
        help="most images that may lose resolution (default 0.1)",
    )
    advise_parser.add_argument(
        "--jobs",
        type=positive_int,
        default=min(available_cpus(), MAX_DEFAULT_JOBS),
        help="candidates priced at once, in forked processes (default: the CPUs this process "
        f"may use, at most {MAX_DEFAULT_JOBS})",
    )
    advise_parser.add_argument("--chart", type=Path, help="write the trade-off as a PNG")
    advise_parser.add_argument("--json", action="store_true", help="one JSON object")
