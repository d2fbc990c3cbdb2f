"""observe.log: one JSON object per line on stderr (or the console format), at the level set,
each carrying the request id bound at arrival."""

from __future__ import annotations

import orjson
import pytest
import structlog

from sidecar.observe.log import configure_logging, get_logger
from sidecar.settings import LogFormat


def _lines(capfd: pytest.CaptureFixture[str]) -> list[str]:
    return capfd.readouterr().err.splitlines()


def test_log_writes_one_json_object_per_event_with_the_bound_request_id(
    capfd: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", LogFormat.JSON)
    structlog.contextvars.bind_contextvars(request_id="r-42")
    try:
        get_logger().info("request.finished", decision="admit", predicted_kv_bytes=4096)
    finally:
        structlog.contextvars.clear_contextvars()
    (line,) = _lines(capfd)
    event = orjson.loads(line)
    assert event["event"] == "request.finished"
    assert (event["request_id"], event["decision"], event["predicted_kv_bytes"]) == (
        "r-42", "admit", 4096,
    )  # fmt: skip
    assert event["level"] == "info"
    assert event["timestamp"].endswith("Z")  # ISO 8601, UTC


def test_log_drops_events_below_the_level(capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging("warning", LogFormat.JSON)
    logger = get_logger()
    logger.info("engine.block_size")
    logger.warning("engine.kv_cache_dtype_differs")
    assert [orjson.loads(line)["event"] for line in _lines(capfd)] == [
        "engine.kv_cache_dtype_differs"
    ]


def test_log_writes_a_readable_line_in_console_format(capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging("debug", LogFormat.CONSOLE)
    get_logger().debug("sidecar.started", port=8080)
    (line,) = _lines(capfd)
    assert "sidecar.started" in line
    assert "port=8080" in line
    assert not line.startswith("{")


def test_log_is_json_by_default_when_stderr_is_not_a_terminal(
    capfd: pytest.CaptureFixture[str],
) -> None:
    configure_logging()
    get_logger().info("sidecar.draining")
    (line,) = _lines(capfd)
    assert orjson.loads(line)["event"] == "sidecar.draining"
