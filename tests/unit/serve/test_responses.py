"""serve.responses: a failure as an HTTP answer, in vLLM's shape or in Anthropic's.

Every route's answers end to end: ``tests/e2e/test_proxy_routes.py`` and ``test_abuse.py``.
"""

from __future__ import annotations

import orjson
import pytest

from sidecar import errors
from sidecar.errors import (
    LargerThanBudgetError,
    NotBase64Error,
    OverloadedError,
    QueueFullError,
    RequestTimeoutError,
    SidecarError,
)
from sidecar.routes import ApiShape
from sidecar.serve.responses import error_body, error_response, response_for_error


def test_error_body_in_vllms_shape_carries_type_param_and_code() -> None:
    body = error_body(400, "bad", error_type="BadRequestError", param="image_url")
    assert orjson.loads(body) == {
        "error": {"message": "bad", "type": "BadRequestError", "param": "image_url", "code": 400}
    }


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (503, "overloaded_error"),
        (502, "api_error"),
        (408, "invalid_request_error"),
    ],
    ids=str,
)
def test_error_body_in_anthropics_shape_maps_the_status_to_its_type(status: int, kind: str) -> None:
    body = error_body(status, "why", error_type="ignored", param="ignored", api=ApiShape.ANTHROPIC)
    assert orjson.loads(body) == {"type": "error", "error": {"type": kind, "message": "why"}}


def test_response_for_error_keeps_the_errors_status_param_and_type() -> None:
    error = NotBase64Error("image 1 of 1: not base64", param="image_url")
    response = response_for_error(error, headers={"x-vlm-sidecar-decision": "r"})
    assert response.status == 400
    assert response.headers["x-vlm-sidecar-decision"] == "r"
    assert "Retry-After" not in response.headers
    assert orjson.loads(response.body)["error"] == {  # type: ignore[arg-type]
        "message": "image 1 of 1: not base64", "type": "BadRequestError",
        "param": "image_url", "code": 400,
    }  # fmt: skip


def test_response_for_error_tells_an_overloaded_client_when_to_retry() -> None:
    response = response_for_error(
        QueueFullError("the queue is full", retry_after_seconds=30), api=ApiShape.ANTHROPIC
    )
    assert (response.status, response.headers["Retry-After"]) == (429, "30")
    assert orjson.loads(response.body)["error"]["type"] == "rate_limit_error"  # type: ignore[arg-type]


def test_response_for_error_closes_the_connection_after_a_slow_body() -> None:
    response = response_for_error(RequestTimeoutError("too slow"))
    assert response.status == 408
    assert response.keep_alive is False


def test_error_body_in_cohere_shape_carries_the_message_and_the_request_id() -> None:
    response = error_response(400, "why", api=ApiShape.COHERE, headers={"x-request-id": "r1"})
    assert response.body is not None
    assert orjson.loads(bytes(response.body)) == {"message": "why", "id": "r1"}


def test_error_response_says_whether_to_retry_as_the_official_sdks_read_it() -> None:
    never = error_response(413, "never fits", retryable=False).headers
    assert never["x-should-retry"] == "false"
    assert never["x-vlm-sidecar-retry-scope"] == "none"
    busy = error_response(429, "later", retry_after_seconds=3).headers
    assert (busy["x-should-retry"], busy["Retry-After"]) == ("true", "3")
    assert busy["x-vlm-sidecar-retry-scope"] == "other-replica"
    assert "x-should-retry" not in error_response(400, "bad request").headers


ERROR_CLASSES = [
    value
    for value in vars(errors).values()
    if isinstance(value, type) and issubclass(value, SidecarError)
]


@pytest.mark.parametrize("error_class", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_a_raised_error_is_typed_as_a_refusal_of_its_status_is(
    error_class: type[SidecarError],
) -> None:
    # A decision's refusal is answered by its status alone, a raised error by its class:
    # the same status must read the same ``type`` either way.
    overloaded = issubclass(error_class, OverloadedError)
    error = error_class("why", retry_after_seconds=1) if overloaded else error_class("why")
    raised = orjson.loads(response_for_error(error).body)["error"]
    refused = orjson.loads(error_response(error_class.status, "why").body)["error"]
    assert (raised["type"], raised["code"]) == (refused["type"], refused["code"])


def test_an_error_no_retry_can_change_tells_clients_so_and_others_do_not() -> None:
    never = response_for_error(LargerThanBudgetError("larger than the whole budget")).headers
    assert (never["x-should-retry"], never["x-vlm-sidecar-retry-scope"]) == ("false", "none")
    assert "x-should-retry" not in response_for_error(NotBase64Error("not base64")).headers
