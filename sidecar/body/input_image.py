"""vLLM's check of a chat ``input_image`` part: ``detail`` is required, as in OpenAI's type.

In chat, vLLM 0.33 validates an ``input_image`` part (one without a ``uuid``) against the
OpenAI SDK's ``ResponseInputImageParam``, whose ``detail`` is required and one of ``low``,
``high``, ``auto`` or ``original``; anything else is a 400 whose message is pydantic's. The
Responses API fills in ``detail: "auto"`` before that check, so only chat-shaped content is
checked. The message is produced by pydantic itself (vLLM's pins the same major version), from
the part as vLLM's earlier union validation leaves it: ``image_url`` first, then the other keys
in the order sent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, Required

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from sidecar.errors import InvalidRequestError

_DETAILS = ("low", "high", "auto", "original")


class ResponseInputImageParam(TypedDict, total=False):
    """The OpenAI SDK's type, named as pydantic names it in the message."""

    detail: Required[Literal["low", "high", "auto", "original"]]
    type: Required[Literal["input_image"]]
    file_id: str | None
    image_url: str | None


@functools.cache
def _adapter() -> TypeAdapter[ResponseInputImageParam]:
    return TypeAdapter(ResponseInputImageParam)


def check_input_image(part: dict[str, Any], as_sent: Callable[[Any], Any]) -> None:
    """Refuse a chat ``input_image`` part without a valid ``detail``, with vLLM's message.
    ``as_sent`` reads back a string the body parser lifted out (a data URI)."""
    if part.get("detail") in _DETAILS:
        return
    shown = {key: as_sent(value) for key, value in part.items()}
    if "image_url" in shown:
        shown = {"image_url": shown.pop("image_url"), **shown}
    try:
        _adapter().validate_python(shown)
    except ValidationError as exc:
        raise InvalidRequestError(str(exc), param=None) from None
