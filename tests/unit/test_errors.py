"""errors: each failure's status, error type and parameter, and the tree its docstring draws."""

from __future__ import annotations

import re

import pytest

from sidecar import errors
from sidecar.errors import (
    OTHER_REPLICA,
    ConfigurationError,
    EngineSaturatedError,
    ImageError,
    ImageTooLargeError,
    InvalidRequestError,
    LargerThanBudgetError,
    OverloadedError,
    QueueFullError,
    SidecarError,
    UpstreamError,
    UpstreamTimeoutError,
    VideoError,
    error_type_for,
)

# One line of the drawing: the branch art, a class name, then the status when one is written.
DRAWN_CLASS = re.compile(r"^(?P<lead>[ │├└─]*)(?P<name>[A-Z]\w+Error)\b(?:\s+(?P<status>\d{3}))?")


def _error_classes() -> dict[str, type[Exception]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and value.__module__ == errors.__name__
    }


def _drawn_tree() -> dict[str, tuple[str | None, int | None]]:
    """Each class the docstring draws: (its parent in the drawing, the status written beside it)."""
    drawn: dict[str, tuple[str | None, int | None]] = {}
    parents: list[tuple[int, str]] = []  # (indent, name) of the open branches
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(
            r"^(?P<lead>[ │├└─]*)(?P<name>[A-Z]\w+Error)\b(?:\s+(?P<status>\d{3}))?", line
        )
        if not match or not line.startswith("    "):
            continue
        indent = len(match["lead"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        parent = parents[-1][1] if parents else None
        drawn[match["name"]] = (parent, int(match["status"]) if match["status"] else None)
        parents.append((indent, match["name"]))
    return drawn


def test_errors_docstring_draws_every_error_class_under_its_real_parent() -> None:
    drawn = _drawn_tree()
    classes = _error_classes()
    assert sorted(drawn) == sorted(classes)
    for name, (parent, _) in drawn.items():
        base = classes[name].__base__
        assert (base.__name__ if base is not Exception else None) == parent, name


def test_errors_docstring_gives_each_class_the_status_it_answers_with() -> None:
    classes = _error_classes()
    for name, (_, status) in _drawn_tree().items():
        if status is not None:
            assert classes[name].status == status, name  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("error", "status", "error_type"),
    [
        (InvalidRequestError("bad"), 400, "BadRequestError"),
        (ImageTooLargeError("big"), 400, "BadRequestError"),
        (VideoError("no stream"), 400, "BadRequestError"),
        (LargerThanBudgetError("huge"), 413, "RequestTooLargeError"),
        (QueueFullError("full", retry_after_seconds=2), 429, "RateLimitError"),
        (UpstreamError("gone"), 502, "BadGatewayError"),
        (UpstreamTimeoutError("slow"), 504, "GatewayTimeoutError"),
    ],
    ids=["invalid", "image", "video", "larger-than-budget", "queue-full", "upstream", "timeout"],
)
def test_errors_carry_the_status_and_vllm_style_type_they_answer_with(
    error: SidecarError, status: int, error_type: str
) -> None:
    assert (error.status, error.error_type) == (status, error_type)


def test_errors_name_the_field_a_media_error_is_about_unless_told_otherwise() -> None:
    assert ImageError("x").param == "image_url"
    assert VideoError("x").param == "video_url"
    assert ImageError("x", param="input_image").param == "input_image"
    assert InvalidRequestError("x").param is None


def test_errors_prefixed_puts_the_context_before_the_message_and_in_str() -> None:
    error = ImageTooLargeError("200000000 pixels").prefixed("image 2")
    assert error.message == "image 2: 200000000 pixels"
    assert str(error) == "image 2: 200000000 pixels"
    assert isinstance(error, ImageTooLargeError)


@pytest.mark.parametrize("kind", [OverloadedError, QueueFullError, EngineSaturatedError])
def test_errors_overload_says_another_replica_may_serve_it_and_when_to_retry(
    kind: type[OverloadedError],
) -> None:
    error = kind("the KV budget stayed full for 5 s", retry_after_seconds=3)
    assert error.retry_after_seconds == 3
    assert error.message == f"the KV budget stayed full for 5 s ({OTHER_REPLICA})"
    assert error.status == 429


def test_errors_configuration_error_is_no_request_failure() -> None:
    assert not issubclass(ConfigurationError, SidecarError)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "BadRequestError"),
        (403, "PermissionDeniedError"),
        (404, "NotFoundError"),
        (413, "RequestTooLargeError"),
        (422, "UnprocessableEntityError"),
        (429, "RateLimitError"),
        (504, "GatewayTimeoutError"),
        (418, "IMATeapotError"),
    ],
    ids=str,
)
def test_error_type_for_is_vllms_name_for_the_status(status: int, error_type: str) -> None:
    assert error_type_for(status) == error_type
