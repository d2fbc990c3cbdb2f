"""The traffic log read back: typed records, oldest first, and the settings it was made under.

``sidecar.observe.traffic`` writes the lines; README's "Traffic log" section is the contract.
A record's ``cost`` holds everything re-pricing needs and nothing else, so equal costs price
equally under any settings: the replay prices each distinct cost once.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

# (width, height, format, source); width and height are None for an image of unknown size.
RecordedImage = tuple[int | None, int | None, str | None, str]
# (kind, tokens, wrapper tokens, priced at the allowance): a video's own figures; audio and
# embeddings items are (kind, 0, 0, True) and cost their per-item allowance.
RecordedMedia = tuple[str, int, int, bool]
# (text tokens, floor tokens, image indexes, media indexes) of one prompt; its prompt tokens
# are max(floor, visual + text).
RecordedPrompt = tuple[int, int, tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class RecordedCost:
    """What pricing a request needs: sizes and counts, never content."""

    images: tuple[RecordedImage, ...]
    text_tokens: int
    text_exact: bool
    output_tokens: int  # as priced: 0 for a request that generates nothing
    output_requested: int | None  # None: the default output tokens were applied
    n: int = 1
    sequences: int = 1
    holds_kv: bool = True
    media: tuple[RecordedMedia, ...] = ()
    prompts: tuple[RecordedPrompt, ...] | None = None  # None: one prompt holding everything
    pixel_range: tuple[int | None, int | None] | None = None  # the request's trusted kwargs


@dataclass(slots=True)  # not frozen: 4x faster to make, and a replay makes millions
class TrafficRecord:
    """One inspected request: when it came, how long it took, what it cost, what was done."""

    request_id: str
    arrival: float  # unix seconds
    route: str
    model: str
    decision: str
    reason: str
    wait_seconds: float
    duration_seconds: float
    held_seconds: float | None  # None: never forwarded to vLLM
    cost: RecordedCost | None  # None: refused before it could be priced
    visual_tokens: int = 0  # as priced when recorded, as sent
    prompt_tokens: int = 0
    kv_bytes: int = 0


@dataclass(frozen=True, slots=True)
class TrafficLogContents:
    """The records by arrival, the settings of the newest header, and what was skipped."""

    records: tuple[TrafficRecord, ...]
    settings: dict[str, Any] | None
    headers: int
    skipped_lines: int


def _rare(value: Any) -> bytes | None:
    """A hashable form of an optional nested field (media, prompts, pixel range)."""
    return None if value is None else orjson.dumps(value)


def parse_record(
    line: dict[str, Any], costs: dict[tuple[Any, ...], RecordedCost] | None = None
) -> TrafficRecord:
    """One record line; KeyError, TypeError or ValueError when it is not one. ``costs``
    interns equal costs (one object for each, so the replay's memo hashes little)."""
    cost = None
    key: tuple[Any, ...] | None = None
    if "img" in line and costs is not None:
        key = (
            tuple(map(tuple, line["img"])),
            line["text"],
            line["exact"],
            line["out"],
            line["out_req"],
            line["n"],
            line["seqs"],
            line["kv_held"],
            _rare(line.get("media")),
            _rare(line.get("seq")),
            _rare(line.get("px")),
        )
        cost = costs.get(key)
    if "img" in line and cost is None:
        media = tuple(_media(item) for item in line.get("media") or ())
        prompts = line.get("seq")
        pixel_range = line.get("px")
        cost = RecordedCost(
            images=tuple((i[0], i[1], i[2], i[3]) for i in line["img"]),
            text_tokens=int(line["text"]),
            text_exact=bool(line["exact"]),
            output_tokens=int(line["out"]),
            output_requested=line["out_req"],
            n=int(line["n"]),
            sequences=int(line["seqs"]),
            holds_kv=bool(line["kv_held"]),
            media=media,
            prompts=None
            if prompts is None
            else tuple((int(p[0]), int(p[1]), tuple(p[2]), tuple(p[3])) for p in prompts),
            pixel_range=None if pixel_range is None else (pixel_range[0], pixel_range[1]),
        )
        if key is not None and costs is not None:
            costs[key] = cost
    held = line["held"]
    return TrafficRecord(
        request_id=str(line["id"]),
        arrival=float(line["t"]),
        route=str(line["route"]),
        model=str(line["model"]),
        decision=str(line["decision"]),
        reason=str(line["reason"]),
        wait_seconds=float(line["wait"]),
        duration_seconds=float(line["dur"]),
        held_seconds=None if held is None else float(held),
        cost=cost,
        visual_tokens=int(line.get("visual", 0)),
        prompt_tokens=int(line.get("prompt", 0)),
        kv_bytes=int(line.get("kv", 0)),
    )


def _media(item: list[Any]) -> RecordedMedia:
    if item[0] == "video":
        return ("video", int(item[1]), int(item[2]), bool(item[3]))
    return (str(item[0]), 0, 0, True)


def parse_lines(lines: Iterable[bytes]) -> TrafficLogContents:
    """Records and headers from JSON lines; lines that are neither are counted and skipped
    (a line cut short by a crash, a newer format's line)."""
    records: list[TrafficRecord] = []
    settings: dict[str, Any] | None = None
    headers = skipped = 0
    costs: dict[tuple[Any, ...], RecordedCost] = {}
    # The writer puts the request's own fields first and its cost after them, from "img" on:
    # lines with equal tails have equal costs, read once.
    tails: dict[bytes, TrafficRecord] = {}
    for raw in lines:
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
            at = raw.find(b'"img":')
            seen = tails.get(raw[at:]) if at > 0 else None
            if seen is not None and _head_then_cost(line):
                records.append(_with_head(seen, line))
            elif line.get("kind") == "settings":
                settings, headers = dict(line["settings"]), headers + 1
            else:
                record = parse_record(line, costs)
                records.append(record)
                if at > 0 and _head_then_cost(line):
                    tails[raw[at:]] = record
        except (
            orjson.JSONDecodeError,
            AttributeError,
            KeyError,
            TypeError,
            ValueError,
            IndexError,
        ):
            skipped += 1
    records.sort(key=lambda record: record.arrival)
    return TrafficLogContents(tuple(records), settings, headers, skipped)


_HEAD = ("id", "t", "route", "model", "decision", "reason", "wait", "dur", "held", "img")


def _head_then_cost(line: dict[str, Any]) -> bool:
    """Whether the line's own fields all come before its cost (as the writer puts them)."""
    return tuple(itertools.islice(line, len(_HEAD))) == _HEAD


def _with_head(seen: TrafficRecord, line: dict[str, Any]) -> TrafficRecord:
    """``seen``'s cost (and recorded price) with this line's own fields."""
    held = line["held"]
    return TrafficRecord(
        str(line["id"]),
        float(line["t"]),
        str(line["route"]),
        str(line["model"]),
        str(line["decision"]),
        str(line["reason"]),
        float(line["wait"]),
        float(line["dur"]),
        None if held is None else float(held),
        seen.cost,
        seen.visual_tokens,
        seen.prompt_tokens,
        seen.kv_bytes,
    )


def log_files(path: Path) -> list[Path]:
    """The rotated backup (``FILE.1``, older) when it exists, then the file itself."""
    backup = path.with_name(path.name + ".1")
    return [backup, path] if backup.is_file() else [path]


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """No cyclic garbage collection while millions of acyclic records are made: the
    collector would walk them all again and again (a third of a replay's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_traffic_log(path: Path) -> TrafficLogContents:
    """Every record of ``path`` and its backup."""

    def lines() -> Iterable[bytes]:
        for file in log_files(path):
            with file.open("rb") as handle:
                yield from handle

    with bulk():
        return parse_lines(lines())
