"""The traffic log read back: typed records, oldest first, and the settings it was made under.

``sidecar.observe.traffic`` writes the lines; docs/traffic-log.md is the contract.
A record's ``cost`` holds everything re-pricing needs and nothing else, so equal costs price
equally under any settings: lines with equal costs share one object, which the replay prices
once.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from sys import intern
from typing import Any

import orjson

from sidecar.observe.traffic_format import FIRST_COST_FIELD, HEADER_KIND, OWN_FIELDS, TAG_FIELDS

# (width, height, format, source); width and height are None for an image of unknown size.
RecordedImage = tuple[int | None, int | None, str | None, str]
# (kind, tokens, wrapper tokens, priced at the allowance): a video's own figures; audio and
# embeddings items are (kind, 0, 0, True) and cost their per-item allowance.
RecordedMedia = tuple[str, int, int, bool]
# (text tokens, floor tokens, image indexes, media indexes) of one prompt; its prompt tokens
# are max(floor, visual + text).
RecordedPrompt = tuple[int, int, tuple[int, ...], tuple[int, ...]]


# Not frozen (a frozen class costs 6x to make, and a replay makes one per distinct request)
# and compared by identity (the reader gives equal costs one object, and the replay's memos
# hash a million of them: identity hashes 4x faster than ``id()``). Never changed once read.
@dataclass(slots=True, eq=False)
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
    # Where it queued, as the request said it (admission.discipline.QueueTags).
    objective: str | None = None
    body_priority: int | None = None
    tenant: str = ""  # hashed or as sent, as SIDECAR_TRAFFIC_LOG_TENANT chose


@dataclass(frozen=True, slots=True)
class TrafficLogContents:
    """The records by arrival, the settings of the newest header, and what was skipped."""

    records: tuple[TrafficRecord, ...]
    settings: dict[str, Any] | None
    headers: int
    skipped_lines: int


def parse_record(
    line: dict[str, Any],
    images: dict[tuple[RecordedImage, ...], tuple[RecordedImage, ...]] | None = None,
) -> TrafficRecord:
    """One record line; KeyError, TypeError or ValueError when it is not one. ``images``:
    image lists already read, so that equal ones are one object (``_cost``)."""
    return _record(
        line,
        _cost(line, {} if images is None else images) if FIRST_COST_FIELD in line else None,
        int(line.get("visual", 0)),
        int(line.get("prompt", 0)),
        int(line.get("kv", 0)),
    )


def _record(
    head: dict[str, Any],
    cost: RecordedCost | None,
    visual_tokens: int,
    prompt_tokens: int,
    kv_bytes: int,
) -> TrafficRecord:
    """A record from a line's own fields (``head``) and its cost and recorded price."""
    held = head["held"]
    objective, body_priority, tenant = head.get("obj"), head.get("prio"), head.get("tenant")
    return TrafficRecord(  # positional: keywords cost a third more, a million times
        str(head["id"]),
        float(head["t"]),
        # Interned: a million equal strings would otherwise be a million objects (280 MB).
        intern(head["route"]),
        intern(head["model"]),
        intern(head["decision"]),
        intern(head["reason"]),
        float(head["wait"]),
        float(head["dur"]),
        None if held is None else float(held),
        cost,
        visual_tokens,
        prompt_tokens,
        kv_bytes,
        None if objective is None else intern(str(objective)),
        None if body_priority is None else int(body_priority),
        "" if tenant is None else intern(str(tenant)),
    )


def _cost(
    line: dict[str, Any], shared: dict[tuple[RecordedImage, ...], tuple[RecordedImage, ...]]
) -> RecordedCost:
    """The line's cost. Its images are the object ``shared`` holds for an equal list, kept if
    new: a log's hundreds of thousands of costs carry a few thousand image lists, and the
    replay looks each cost's list up, which is faster on one object read again and again."""
    media, prompts, pixel_range = line.get("media"), line.get("seq"), line.get("px")
    images = tuple([(i[0], i[1], i[2], i[3]) for i in line["img"]])
    return RecordedCost(
        shared.setdefault(images, images),
        int(line["text"]),
        bool(line["exact"]),
        int(line["out"]),
        line["out_req"],
        int(line["n"]),
        int(line["seqs"]),
        bool(line["kv_held"]),
        () if not media else tuple([_media(item) for item in media]),
        None
        if prompts is None
        else tuple([(int(p[0]), int(p[1]), tuple(p[2]), tuple(p[3])) for p in prompts]),
        None if pixel_range is None else (pixel_range[0], pixel_range[1]),
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
    # The writer puts the request's own fields first and its cost after them, from
    # FIRST_COST_FIELD on: lines with equal tails have equal costs, read once and shared
    # (``_shareable``).
    tails: dict[bytes, _Shared] = {}
    images: dict[tuple[RecordedImage, ...], tuple[RecordedImage, ...]] = {}
    in_order = True
    latest = -math.inf
    for raw in lines:
        try:
            at = raw.find(_COST_STARTS)
            tail = raw[at:]
            seen = tails.get(tail) if at > 0 else None
            if seen is not None and (head := _head(raw, at)) is not None:
                # Only the head is parsed: its tail was read before. A third less to parse.
                record = _record(head, *seen)
            else:
                line = orjson.loads(raw)
                if line.get("kind") == HEADER_KIND:
                    settings, headers = dict(line["settings"]), headers + 1
                    continue
                record = parse_record(line, images)
                if at > 0 and _shareable(line, tail):
                    tails[tail] = (
                        record.cost,
                        record.visual_tokens,
                        record.prompt_tokens,
                        record.kv_bytes,
                    )
        except (
            orjson.JSONDecodeError,
            AttributeError,
            KeyError,
            TypeError,
            ValueError,
            IndexError,
        ):
            skipped += bool(raw.strip())  # blank lines are not worth a count
            continue
        records.append(record)
        if record.arrival < latest:
            in_order = False
        latest = record.arrival
    if not in_order:  # lines are written as requests finish, not as they arrive
        records.sort(key=attrgetter("arrival"))
    return TrafficLogContents(tuple(records), settings, headers, skipped)


_COMMA = ord(",")
# What a tail gives every line ending in it: the cost and the recorded price.
_Shared = tuple[RecordedCost | None, int, int, int]
_COST_STARTS = f'"{FIRST_COST_FIELD}":'.encode()
_OWN, _TAGS = OWN_FIELDS, TAG_FIELDS  # tags are own fields too, written only when present


def _head(raw: bytes, at: int) -> dict[str, Any] | None:
    """The line's own fields, from the text before its cost (which starts at ``at``); None
    unless that text is the request's own fields and nothing else (a cost field written
    before FIRST_COST_FIELD would make this line's cost differ from the shared tail's)."""
    if raw[at - 1] != _COMMA:
        return None
    try:
        head: dict[str, Any] = orjson.loads(raw[: at - 1] + b"}")
    except orjson.JSONDecodeError:
        return None
    return head if len(head) == len(_OWN) + sum(tag in head for tag in _TAGS) else None


def _shareable(line: dict[str, Any], tail: bytes) -> bool:
    """Whether every line ending in ``tail`` has this line's cost, whatever comes before it
    (``_head`` checks that what comes before is the request's own fields alone).
    The line's own fields come first (as the writer puts them), so its cost fields are all
    in the tail; and the tail holds no more keys than those (no own field written twice,
    which a parser reads as the last one), so another line's head gives that line's own
    fields. Every key is followed by a colon, and a colon outside a string is nothing else:
    a tail with as many colons as the line has cost keys holds those keys and no others."""
    head = (*_OWN, *[tag for tag in _TAGS if tag in line], FIRST_COST_FIELD)
    first = tuple(itertools.islice(line, len(head)))
    return first == head and tail.count(b":") == len(line) - len(head) + 1


def log_files(path: Path) -> list[Path]:
    """The rotated backup (``FILE.1``, older) when it exists, then the file itself."""
    backup = path.with_name(path.name + ".1")
    return [backup, path] if backup.is_file() else [path]


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """No cyclic garbage collection while millions of acyclic records are made, and none
    over them afterwards: everything alive then is frozen out of the collector
    (``gc.freeze``), which would otherwise walk the records again and again (a third of a
    replay's time, 1.7 s for a million records at the first collection after). Frozen objects
    are still freed when their last reference goes; only reference cycles alive at the freeze
    wait for ``gc.unfreeze``. Meant for the one-shot ``replay`` and ``advise`` commands, not
    for a long-running process."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def read_traffic_log(path: Path) -> TrafficLogContents:
    """Every record of ``path`` and its backup."""

    with bulk(), contextlib.ExitStack() as files:
        handles = [files.enter_context(file.open("rb")) for file in log_files(path)]
        return parse_lines(itertools.chain.from_iterable(handles))
