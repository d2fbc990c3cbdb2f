"""A request body's JSON read and written as vLLM's server reads it, at orjson's speed.

vLLM's server parses a body with the standard library's ``json``, which keeps every integer
whole. orjson, which the sidecar reads bodies with for speed, keeps integers only within 64
bits and reads a longer one as the nearest float, so a tool schema's
``"maximum": 100000000000000000000`` would render into the prompt as ``1e+20`` (fewer tokens
than vLLM counts), and a rewritten body would carry a number the client never sent. So a body
that holds a run of digits that long anywhere (also inside a string, which costs only the
slower parse) is read by the standard library; every other body by orjson, which reads it
the same.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Every digit as "0", "-" kept, every other byte as ".": a run of integer digits becomes a run
# of zeros that bytes.find spots at C speed.
_DIGIT_RUNS = bytes(48 if 48 <= b <= 57 else 45 if b == 45 else 46 for b in range(256))
# orjson keeps 0 to 2**64 - 1 and down to -2**63: 20 digits, or 19 after a minus.
_LONG_POSITIVE = b"0" * 20
_LONG_NEGATIVE = b"-" + b"0" * 19


def loads(data: bytes) -> Any:
    """``data`` parsed; raises ``orjson.JSONDecodeError`` where it is not JSON."""
    value = orjson.loads(data)
    runs = data.translate(_DIGIT_RUNS)
    if _LONG_POSITIVE in runs or _LONG_NEGATIVE in runs:
        try:
            return json.loads(data)
        except (ValueError, RecursionError):  # past its digit or depth limit: vLLM refuses it
            return value
    return value


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON, integers past 64 bits written whole."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
