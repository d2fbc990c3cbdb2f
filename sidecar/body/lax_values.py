"""JSON values read as vLLM's request models read them.

vLLM validates a request body with pydantic in lax mode, so its ``int`` fields take ``7``,
``7.0``, ``"7"`` and ``true`` alike and its ``bool`` fields take ``"false"``, ``0`` and
``"off"``. The sidecar reads the same fields to price the request; reading them any stricter
refuses requests vLLM serves, and any other way prices a request vLLM reads differently. So
the reading here is pydantic's own, behind a fast path for the values JSON clients send.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

_INT: TypeAdapter[int] = TypeAdapter(int)
_BOOL: TypeAdapter[bool] = TypeAdapter(bool)
_INT_LIST: TypeAdapter[list[int]] = TypeAdapter(list[int])

Default = TypeVar("Default", bool, None)


def lax_int(value: Any) -> int | None:
    """``value`` as an ``int`` field reads it, or None where that field refuses it."""
    if type(value) is int:
        return value
    if value is None:
        return None
    if type(value) is float:  # also past int64, where the caller's range check answers
        return int(value) if value.is_integer() else None
    try:
        return _INT.validate_python(value)
    except ValidationError:
        return None


def lax_bool(value: Any, default: Default) -> bool | Default:
    """``value`` as a ``bool`` field reads it; ``default`` where absent or refused."""
    if type(value) is bool:
        return value
    if value is None:
        return default
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return default


def is_int_list(value: list[Any]) -> bool:
    """Whether a ``list[int]`` field reads ``value``: ``[1, "2", true]`` is ``[1, 2, 1]``."""
    if all(type(v) is int for v in value):
        return True
    try:
        _INT_LIST.validate_python(value)
    except ValidationError:
        return False
    return True


def is_token_ids(value: list[Any]) -> bool:
    """Whether a prompt field typed ``list[int] | ... | list[str]`` reads its list as token
    ids rather than as texts: pydantic's union takes a list of strings as texts (its strict
    match), and any other list a ``list[int]`` reads as ids."""
    if all(type(v) is int for v in value):
        return True
    return not all(isinstance(v, str) for v in value) and is_int_list(value)
