"""Traffic log record lines for tests, as ``observe.traffic`` writes them: a request's own
fields first, then a one-image cost with its recorded price."""

from __future__ import annotations

from typing import Any

from sidecar.observe import traffic_format
from tests.support.sidecars import QWEN

# Named and ordered by the format: a field renamed there is renamed here.
OWN_FIELDS: dict[str, Any] = dict(
    zip(
        traffic_format.OWN_FIELDS,
        ("r0", 5.0, "chat_completions", QWEN, "admit", "within_budget", 0.0, 0.5, 0.5),
        strict=True,
    )
)
COST_FIELDS: dict[str, Any] = dict(
    zip(
        traffic_format.COST_FIELDS,
        ([[640, 480, "jpeg", "data"]], 23, False, 256, 256, 1, 1, True, 0, 0, 0),
        strict=True,
    )
)


def record_line(
    own: dict[str, Any] | None = None, cost: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A record line's fields: ``own`` changes the request's own, ``cost`` replaces the cost."""
    return {**OWN_FIELDS, **(own or {}), **(COST_FIELDS if cost is None else cost)}
