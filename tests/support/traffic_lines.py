"""Traffic log record lines for tests, as ``observe.traffic`` writes them: a request's own
fields first, then a one-image cost with its recorded price."""

from __future__ import annotations

from typing import Any

from tests.support.sidecars import QWEN

OWN_FIELDS: dict[str, Any] = {
    "id": "r0",
    "t": 5.0,
    "route": "chat_completions",
    "model": QWEN,
    "decision": "admit",
    "reason": "within_budget",
    "wait": 0.0,
    "dur": 0.5,
    "held": 0.5,
}
COST_FIELDS: dict[str, Any] = {
    "img": [[640, 480, "jpeg", "data"]],
    "text": 23,
    "exact": False,
    "out": 256,
    "out_req": 256,
    "n": 1,
    "seqs": 1,
    "kv_held": True,
    "visual": 0,
    "prompt": 0,
    "kv": 0,
}


def record_line(
    own: dict[str, Any] | None = None, cost: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A record line's fields: ``own`` changes the request's own, ``cost`` replaces the cost."""
    return {**OWN_FIELDS, **(own or {}), **(COST_FIELDS if cost is None else cost)}
