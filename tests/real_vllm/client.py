"""Raw HTTP to vLLM or the sidecar for the real-engine tier: bytes exactly as sent and received.

``http.client`` rather than an SDK: nothing is re-encoded, redirects are not followed, and a
stream arrives as the bytes the server wrote, so direct and relayed answers can be compared
byte for byte. The prompt-token readers say, per API, where the whole prompt is counted.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from tests.real_vllm.record import normalize
from tests.support.goldens import SseEvent, sse_events

PREDICTED_HEADER = "x-vlm-sidecar-prompt-tokens"
DECISION_HEADER = "x-vlm-sidecar-decision"
TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class Answer:
    """One answer: status, headers (lower-case names) and the body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[SseEvent]:
        return sse_events(self.body)

    @property
    def streaming(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def predicted_prompt_tokens(self) -> int | None:
        value = self.headers.get(PREDICTED_HEADER)
        return int(value) if value is not None else None

    @property
    def forwarded(self) -> bool:
        """Whether the sidecar sent the request on to vLLM (it answers refusals itself)."""
        return self.headers.get(DECISION_HEADER) in ("admit", "wait", "downscale")


def send(
    base_url: str,
    method: str,
    path: str,
    body: dict[str, Any] | bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request; the whole answer (streams read to their end)."""
    url = urllib.parse.urlsplit(base_url)
    payload = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = dict(headers or {})
    if payload is not None:
        sent.setdefault("content-type", "application/json")
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=TIMEOUT_SECONDS)
    try:
        connection.request(method, path, body=payload, headers=sent)
        reply = connection.getresponse()
        data = reply.read()
        kept = {name.lower(): value for name, value in reply.getheaders()}
    finally:
        connection.close()
    return Answer(reply.status, kept, data)


def get_text(url: str) -> str:
    """A GET whose answer is text (``/metrics``, ``/openapi.json``)."""
    parts = urllib.parse.urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    answer = send(base, "GET", path)
    if answer.status != 200:
        raise RuntimeError(f"GET {url}: {answer.status} {answer.body[:200]!r}")
    return answer.body.decode()


def whole_prompt(usage: dict[str, Any], route: str) -> int:
    """The whole prompt in one API's ``usage``: Anthropic's ``input_tokens`` leaves out the
    cached prefix, Responses' and OpenAI's count it."""
    if route.startswith("/v1/messages"):
        return int(
            usage["input_tokens"]
            + usage.get("cache_creation_input_tokens", 0)
            + usage.get("cache_read_input_tokens", 0)
        )
    if route.startswith("/v1/responses"):
        return int(usage["input_tokens"])
    return int(usage["prompt_tokens"])


def reported_prompt_tokens(route: str, answer: Answer) -> int | None:
    """vLLM's own prompt count in a successful answer, wherever that route reports it;
    None when this answer carries none (a stream without a usage chunk)."""
    if answer.streaming:
        for event in answer.events():
            data = event.data
            if event.type == "response.completed":
                return whole_prompt(data["response"]["usage"], route)
            if event.type == "message_start":
                return whole_prompt(data["message"]["usage"], route)
            if isinstance(data, dict) and data.get("usage") and "choices" in data:
                return whole_prompt(data["usage"], route)
        return None
    document = answer.json()
    if route == "/v1/messages/count_tokens":
        return int(document["input_tokens"])
    if route == "/tokenize":
        return int(document["count"])
    if route.endswith("/render"):
        return sum(len(ids) for ids in render_token_ids(document))
    return whole_prompt(document["usage"], route)


def render_token_ids(document: Any) -> list[list[int]]:
    """The prompts of a ``*/render`` answer: one object (chat, responses, messages) or a list
    of them (completions, one per prompt)."""
    items = document if isinstance(document, list) else [document]
    prompts = []
    for item in items:
        ids = item.get("token_ids", item.get("prompt_token_ids"))
        if not isinstance(ids, list):
            raise ValueError(f"no token ids in a render answer: {str(item)[:200]}")
        prompts.append([int(token) for token in ids])
    return prompts


def comparable(body: bytes) -> bytes:
    """``body`` with what differs between two runs of one request zeroed: hex ids, timestamps
    (``record.normalize``)."""
    return normalize(body)


def coalesced(body: bytes) -> list[tuple[str | None, Any]]:
    """A stream's events with consecutive text deltas merged into one.

    vLLM's API server coalesces tokens that the engine made while it was busy into one chunk,
    so on loaded cores the same text can arrive split differently from one run to the next.
    Merged, two runs of one request compare equal field for field; every other field (finish,
    fingerprint, usage, ids) is the later chunk's, as sent. Responses' sequence numbers are
    counted again after the merge.
    """
    merged: list[tuple[str | None, Any]] = []
    for event in sse_events(body):
        if merged and _merge_into(merged[-1][1], event.data):
            merged[-1] = (event.name, _merged(merged[-1][1], event.data))
        else:
            merged.append((event.name, event.data))
    for number, (_, data) in enumerate(merged):
        if isinstance(data, dict) and "sequence_number" in data:
            data["sequence_number"] = number
    return merged


def _text_of(data: Any) -> tuple[str, str] | None:
    """(kind, text) of a pure text delta, or None: the only events ``coalesced`` merges."""
    if not isinstance(data, dict):
        return None
    if data.get("type") == "response.output_text.delta":
        return "responses", str(data["delta"])
    delta = data.get("delta")
    if data.get("type") == "content_block_delta" and isinstance(delta, dict):
        return ("messages", str(delta["text"])) if delta.get("type") == "text_delta" else None
    choices = data.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or "usage" in data:
        return None
    choice = choices[0]
    if isinstance(choice.get("delta"), dict) and set(choice["delta"]) == {"content"}:
        return f"chat-{choice['index']}", str(choice["delta"]["content"])
    if "text" in choice:
        return f"completions-{choice['index']}", str(choice["text"])
    return None


def _merge_into(earlier: Any, later: Any) -> bool:
    first, second = _text_of(earlier), _text_of(later)
    if first is None or second is None or first[0] != second[0]:
        return False
    choices = earlier.get("choices")
    return not choices or choices[0].get("finish_reason") is None


def _merged(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    text = _text_of(earlier)[1] + _text_of(later)[1]  # type: ignore[index]
    data = json.loads(json.dumps(later))
    if data.get("type") == "response.output_text.delta":
        data["delta"] = text
    elif data.get("type") == "content_block_delta":
        data["delta"]["text"] = text
    elif "delta" in data["choices"][0]:
        data["choices"][0]["delta"]["content"] = text
    else:
        data["choices"][0]["text"] = text
    return dict(data)
