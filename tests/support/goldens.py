"""Golden exchanges recorded from real vLLM: ``tests/data/vllm/``, by ``real_vllm/record.py``.

``golden(name)`` reads one: the request as sent (long strings shortened, see the README there),
the status, the kept headers and the body bytes. ``sse_events`` splits a stream into its
events; ``field_shape`` reduces a JSON document to the nested set of its field names, which is
what a stand-in must reproduce (values are generated noise).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import orjson

from tests.support.paths import DATA

GOLDEN_DIR = DATA / "vllm"
DONE = "[DONE]"


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event:`` name (None when absent) and its parsed data."""

    name: str | None
    data: Any  # the JSON document, or DONE

    @property
    def type(self) -> str | None:
        """The ``type`` field of the data, where there is one."""
        return self.data.get("type") if isinstance(self.data, dict) else None


@dataclass(frozen=True)
class Golden:
    """One recorded request and vLLM's answer."""

    name: str
    method: str
    path: str
    request: dict[str, Any]
    status: int
    headers: dict[str, str]
    body: bytes
    note: str

    @property
    def streaming(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    def json(self) -> Any:
        return orjson.loads(self.body)

    def events(self) -> list[SseEvent]:
        return sse_events(self.body)


def golden_names() -> list[str]:
    """Every recorded case, sorted."""
    return sorted(path.stem for path in GOLDEN_DIR.glob("*.body"))


@functools.cache
def golden(name: str) -> Golden:
    meta = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    request = meta["request"]
    return Golden(
        name=name,
        method=request["method"],
        path=request["path"],
        request=request,
        status=int(meta["status"]),
        headers=dict(meta["headers"]),
        body=(GOLDEN_DIR / f"{name}.body").read_bytes(),
        note=meta.get("note", ""),
    )


def sse_events(body: bytes) -> list[SseEvent]:
    """The events of an SSE body, in order (comments and empty events skipped)."""
    events = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data_lines = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data_lines.append(line[5:].strip())
        if not data_lines:
            continue
        data = b"\n".join(data_lines)
        events.append(SseEvent(name, DONE if data == b"[DONE]" else orjson.loads(data)))
    return events


def field_shape(value: Any) -> Any:
    """The field names of a JSON document, recursively: objects become ``{name: shape}``,
    lists the union of their items' shapes (as a one-item list), scalars ``None``.

    Two documents with the same shape have the same fields at every level; their values may
    differ. A null and an object at the same place differ (null is a scalar).
    """
    if isinstance(value, dict):
        return {key: field_shape(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        merged: Any = None
        for item in value:
            merged = _merge(merged, field_shape(item))
        return [] if not value else [merged]
    return None


def _merge(left: Any, right: Any) -> Any:
    if isinstance(left, dict) and isinstance(right, dict):
        return {key: _merge(left.get(key), right.get(key)) for key in sorted({*left, *right})}
    if isinstance(left, list) and isinstance(right, list):
        return (
            [_merge(left[0] if left else None, right[0] if right else None)]
            if (left or right)
            else []
        )
    return left if right is None else right
