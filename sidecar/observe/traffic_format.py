"""The traffic log's format: its version, its header line, and its field names in line order.

The writer (``observe.traffic``), the reader (``advisor.records``), the tests' lines and the
replay bench all take the names and their order from here; docs/traffic-log.md says what each
field means. The reader relies on the order: a line's own fields come first and its cost from
``FIRST_COST_FIELD`` on, so lines with equal tails have equal costs and are read once.
"""

from __future__ import annotations

from typing import Any

TRAFFIC_FORMAT = 1
HEADER_KIND = "settings"  # the ``kind`` of the header line; record lines have none

# The request's own fields, first on every record line, in this order.
OWN_FIELDS = ("id", "t", "route", "model", "decision", "reason", "wait", "dur", "held")
# Its queue tags, after them, each only when the request said it.
TAG_FIELDS = ("obj", "prio", "tenant")
# Its cost and the price recorded, on a priced request's line.
COST_FIELDS = (
    "img",
    "text",
    "exact",
    "out",
    "out_req",
    "n",
    "seqs",
    "kv_held",
    "visual",
    "prompt",
    "kv",
)
FIRST_COST_FIELD = COST_FIELDS[0]
# Cost fields only a request with media, several prompts or its own pixel range carries.
OPTIONAL_COST_FIELDS = ("media", "seq", "px")
# What vLLM reported, when it answered with usage.
OBSERVED_FIELDS = ("obs", "img_err")
LINE_ORDER = (*OWN_FIELDS, *TAG_FIELDS, *COST_FIELDS, *OPTIONAL_COST_FIELDS, *OBSERVED_FIELDS)


def header_line(settings: dict[str, Any], unix_seconds: float) -> dict[str, Any]:
    """The first line of each file: the settings in force when it was started."""
    return {
        "kind": HEADER_KIND,
        "format": TRAFFIC_FORMAT,
        "t": round(unix_seconds, 6),
        "settings": settings,
    }
