"""Requests drawn from vLLM's own API schema, sent to vLLM directly and through the sidecar.

vLLM's ``/openapi.json`` describes every request body it accepts; Schemathesis draws bodies
from it (valid and almost-valid ones alike), and each is also given a conversation of real
images of random formats and sizes half of the time on the routes that carry one, so the
image paths are exercised on every route that takes them. Every POST route of the schema
that the sidecar inspects is drawn from. Each body is sent twice, to vLLM and to the
sidecar in front of it (no budget it could exceed), and the two answers are compared:

* the sidecar never answers a 5xx of its own (a 5xx vLLM answered is relayed as it was);
* it never refuses what vLLM accepts (a false refusal);
* when vLLM accepts and reports the prompt's size, the prediction equals it where the
  sidecar says it is exact (``prompt_tokens_exact`` in its log line) and is not below it
  where it estimates;
* when vLLM refuses, the client gets a refusal of the same class (vLLM's own, relayed, or
  the sidecar's with a 4xx).

With budgets on: each body also goes through a second sidecar with a prompt budget
(``PROMPT_BUDGET``, nothing downscaled). On the conversation routes, where the budget is one
prompt's and vLLM reports it, a refusal must name a budget vLLM's own count exceeds (where
the prediction is exact), and nothing over it may be forwarded. Each such route first sends
two fixed conversations, one within the budget and one past it, so both checks always run.

A quarter of the bodies have their top-level scalars respelled as vLLM's lax fields still
read them (``"4"`` or ``4.0`` for ``4``, ``"off"`` for ``false``, a token id as a string),
which the schema never draws.

Generated sizes are kept cheap for a tiny model on CPU: output is capped at a few tokens
(``max_tokens`` and its aliases), ``n`` at 2, and the answers' text is never compared.
``run`` returns every disagreement as a row of a table; ``tests/real_vllm/test_differential.py``
runs it time-boxed and seeded in CI, ``make fuzz-vllm`` runs it long and writes its figures
into ``docs/reliability.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import hypothesis.strategies as st
import orjson
import pybase64
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from PIL import Image

from sidecar.admission.decision import Reason
from sidecar.routes import PathKind, match_path
from tests.real_vllm.client import Answer, reported_prompt_tokens, send

# Routes whose bodies carry chat messages, and the field that holds them.
CONVERSATION_FIELD = {
    "/v1/chat/completions": "messages",
    "/v1/chat/completions/render": "messages",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "messages",
    "/tokenize": "messages",
    "/v1/messages/render": "messages",
    "/v1/responses": "input",
    "/v1/responses/render": "input",
}
OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
# Routes that generate unless told how little: vLLM's default output is the rest of the context.
GENERATING_ROUTES = (
    "/v1/chat/completions",
    "/v1/chat/completions/batch",
    "/v1/completions",
    "/v1/responses",
    "/invocations",
)
MAX_OUTPUT_TOKENS = 4
MAX_N = 2
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF")
# vLLM's limit in the tier (--limit-mm-per-prompt image=4), and one over it.
MAX_IMAGES = 5


@dataclass(frozen=True)
class Disagreement:
    """One request where the sidecar and vLLM did not agree as they must."""

    route: str
    rule: str
    example: str
    vllm: str
    sidecar: str
    body: str = ""  # the whole body as sent, JSON, to replay it (``example`` is cut short)


@dataclass
class Tally:
    """What a run did: requests per route and answer class, and what disagreed."""

    requests: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    disagreements: list[Disagreement] = field(default_factory=list)
    seconds: float = 0.0
    route_seconds: dict[str, float] = field(default_factory=dict)
    # With budgets on: what each answer of the budgeted sidecar was checked against.
    budget_checks: Counter[str] = field(default_factory=Counter)

    def table(self) -> str:
        lines = [
            "| route | requests | vLLM 2xx | vLLM 4xx | vLLM 5xx | refused by the sidecar |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for route in sorted(self.requests):
            counts = {key[1:]: value for key, value in self.outcomes.items() if key[0] == route}
            by_vllm = Counter[str]()
            for (vllm, _), value in counts.items():
                by_vllm[vllm] += value
            own = sum(v for (_, ours), v in counts.items() if ours == "own 4xx")
            lines.append(
                f"| `{route}` | {self.requests[route]} | {by_vllm['2xx']} | {by_vllm['4xx']} "
                f"| {by_vllm['5xx']} | {own} |"
            )
        return "\n".join(lines) + "\n"

    def budget_table(self, budget: int) -> str:
        if not self.budget_checks:
            return ""
        lines = [
            f"With `SIDECAR_MAX_REQUEST_PROMPT_TOKENS={budget}`, on the conversation routes:\n",
            "| answer of the budgeted sidecar | checked against vLLM's count | bodies |",
            "|---|---|---:|",
        ]
        for answer, check in BUDGET_CHECKS.items():
            lines.append(f"| {answer} | {check} | {self.budget_checks[answer]} |")
        return "\n".join(lines) + "\n"

    def disagreement_table(self) -> str:
        if not self.disagreements:
            return "No disagreements.\n"
        lines = ["| route | rule | example | vLLM | sidecar |", "|---|---|---|---|---|"]
        for row in self.disagreements:
            lines.append(
                f"| `{row.route}` | {row.rule} | `{row.example}` | {row.vllm} | {row.sidecar} |"
            )
        return "\n".join(lines) + "\n"


def image_data_uri(rng: random.Random) -> str:
    """A real image of a random format and a log-uniform size, as a data URI."""
    width = max(1, round(2 ** rng.uniform(0, 11)))
    height = max(1, round(2 ** rng.uniform(0, 11)))
    image_format = rng.choice(IMAGE_FORMATS)
    mode = "RGB" if image_format in ("JPEG", "GIF") else rng.choice(("RGB", "RGBA", "L"))
    image = Image.new(mode, (width, height), color=rng.randrange(256) if mode == "L" else None)
    buffer = io.BytesIO()
    image.save(buffer, format=image_format)
    mime = {"PNG": "png", "JPEG": "jpeg", "WEBP": "webp", "GIF": "gif"}[image_format]
    return f"data:image/{mime};base64,{pybase64.b64encode(buffer.getvalue()).decode()}"


def conversation(route: str, rng: random.Random) -> list[dict[str, Any]] | list[Any]:
    """One user turn of text and 0 to ``MAX_IMAGES`` real images, in the route's shape."""
    uris = [image_data_uri(rng) for _ in range(rng.randrange(MAX_IMAGES + 1))]
    text = rng.choice(("Describe.", "What is in these?", "hi " * rng.randrange(1, 40)))
    return user_turn(route, uris, text)


def user_turn(route: str, uris: list[str], text: str) -> list[dict[str, Any]]:
    """One user turn of ``text`` after the images ``uris``, in the route's shape."""
    if route.startswith("/v1/messages"):
        parts: list[dict[str, Any]] = [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": uri.split(";")[0].removeprefix("data:"),
                    "data": uri.split(",", 1)[1],
                },
            }
            for uri in uris
        ]
        parts.append({"type": "text", "text": text})
    elif route == "/v1/responses":
        parts = [{"type": "input_image", "image_url": uri} for uri in uris]
        parts.append({"type": "input_text", "text": text})
    else:
        parts = [{"type": "image_url", "image_url": {"url": uri}} for uri in uris]
        parts.append({"type": "text", "text": text})
    return [{"role": "user", "content": parts}]


def shaped(route: str, body: Any, model: str, rng: random.Random) -> Any:
    """The drawn body made cheap to serve and addressed to the served model; some of the
    time its conversation is replaced by one with real images."""
    if not isinstance(body, dict):
        return body
    body = dict(body)
    if "model" in body or rng.random() < 0.9:
        body["model"] = model
    for name in OUTPUT_FIELDS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_OUTPUT_TOKENS:
            body[name] = MAX_OUTPUT_TOKENS
    if route == "/v1/messages" and not isinstance(body.get("max_tokens"), int):
        body.setdefault("max_tokens", MAX_OUTPUT_TOKENS)
    if route == "/inference/v1/generate":
        sampling = body.get("sampling_params")
        if sampling is None or isinstance(sampling, dict):
            sampling = dict(sampling or {})
            value = sampling.get("max_tokens")
            if not isinstance(value, int) or isinstance(value, bool) or value > MAX_OUTPUT_TOKENS:
                sampling["max_tokens"] = MAX_OUTPUT_TOKENS
            body["sampling_params"] = sampling
    generating = route in GENERATING_ROUTES
    if generating and not any(isinstance(body.get(name), int) for name in OUTPUT_FIELDS):
        body["max_tokens" if route != "/v1/responses" else "max_output_tokens"] = MAX_OUTPUT_TOKENS
    for name in ("n", "best_of"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_N:
            body[name] = MAX_N
    conversation_field = CONVERSATION_FIELD.get(route)
    if conversation_field is not None and rng.random() < 0.5:
        body[conversation_field] = conversation(route, rng)
    if rng.random() < LAX_SPELLED_SHARE:
        body = lax_spelled(body, rng)
    return body


# The share of bodies whose scalars are respelled as vLLM's lax pydantic fields still read
# them; the schema itself only ever draws the strict spelling.
LAX_SPELLED_SHARE = 0.25
_LAX_TRUE = ("true", "yes", "on", "1", "t", 1)
_LAX_FALSE = ("false", "no", "off", "0", "f", 0)


def lax_spelled(body: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``body`` with some top-level integers written as strings or floats, booleans as
    strings or 0/1, and one token id of a list as a string: what vLLM reads as the same."""
    respelled = dict(body)
    for key, value in body.items():
        if key == "model" or rng.random() < 0.5:
            continue
        if isinstance(value, bool):
            respelled[key] = rng.choice(_LAX_TRUE if value else _LAX_FALSE)
        elif isinstance(value, int) and abs(value) < 2**53:
            respelled[key] = rng.choice((str(value), float(value), f" {value} "))
        elif isinstance(value, list) and value and all(type(v) is int for v in value):
            ids: list[Any] = list(value)
            at = rng.randrange(len(ids))
            ids[at] = str(ids[at])
            respelled[key] = ids
    return respelled


def budget_anchors(route: str, model: str) -> list[dict[str, Any]]:
    """Two fixed conversations every run sends first on ``route``, so the budget's checks
    always meet both answers: text alone (within ``PROMPT_BUDGET`` on the tier's models) and
    a 640x480 image (past it)."""
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), (90, 120, 200)).save(buffer, format="PNG")
    uri = f"data:image/png;base64,{pybase64.b64encode(buffer.getvalue()).decode()}"
    output = {"max_output_tokens" if route == "/v1/responses" else "max_tokens": MAX_OUTPUT_TOKENS}
    caps = output if route in GENERATING_ROUTES or route == "/v1/messages" else {}
    field = CONVERSATION_FIELD[route]
    return [
        {"model": model, field: user_turn(route, uris, "Describe.")} | caps for uris in ([], [uri])
    ]


def inspected_routes(spec: dict[str, Any]) -> list[str]:
    """The POST routes of vLLM's schema that the sidecar inspects (the render routes are
    there only with --enable-scale-out, which the tier's engines run with)."""
    paths = spec.get("paths", {})
    return sorted(
        path
        for path, operations in paths.items()
        if "post" in operations and match_path(path) is PathKind.INSPECTED
    )


def answer_class(answer: Answer) -> str:
    return f"{answer.status // 100}xx"


def sidecar_refused(answer: Answer) -> bool:
    """Whether the sidecar answered itself rather than relaying vLLM."""
    return answer.headers.get("x-vlm-sidecar-decision") == "reject"


def compare(
    route: str,
    body: Any,
    direct: Answer,
    through: Answer,
    log_line: Callable[[str], dict[str, object] | None],
    request_id: str,
) -> Iterable[Disagreement]:
    """The disagreements between vLLM's answer and the sidecar's to the same body."""

    def row(rule: str) -> Disagreement:
        return _row(route, body, direct, through, rule)

    if through.status >= 500 and (sidecar_refused(through) or direct.status < 500):
        yield row("sidecar 5xx of its own")
        return
    if direct.status == HTTPStatus.NOT_IMPLEMENTED and 400 <= through.status < 500:
        # vLLM answers 501 before reading the body when the served model lacks the route's
        # API (/v1/systemone on a model without structured decisions); a 4xx for a body the
        # sidecar cannot price is as final a refusal, and nothing reached vLLM.
        return
    if direct.status < 300 and through.status >= 300:
        yield row("false refusal")
        return
    if direct.status >= 500 and through.status < 400 and not sidecar_refused(through):
        # vLLM failed on one send of the body and served the other, which the sidecar
        # relayed as vLLM answered it: a fault of vLLM's, not a verdict on the body.
        return
    if direct.status >= 400 and through.status < 400:
        yield row("accepted what vLLM refuses")
        return
    if direct.status >= 400 and through.status // 100 != direct.status // 100:
        yield row("refusal of another class")
        return
    if direct.status >= 300 or through.status >= 300:
        return
    actual = _reported(route, direct)
    predicted = through.predicted_prompt_tokens
    if actual is None or predicted is None:
        return
    line = log_line(request_id) or {}
    if line.get("prompt_tokens_exact") is True and predicted != actual:
        yield row(f"exact prediction {predicted} is not vLLM's {actual}")
    elif predicted < actual:
        yield row(f"estimate {predicted} below vLLM's {actual}")


# The prompt budget of the budgeted sidecar: on the tier's tiny models a conversation with one
# mid-sized image is over it and one of text alone within it, so drawn bodies fall both ways.
PROMPT_BUDGET = 256
BUDGET_REASON = Reason.MAX_REQUEST_PROMPT_TOKENS.value
# Each answer the budgeted sidecar gave, and what it was checked against.
BUDGET_CHECKS = {
    "forwarded": "vLLM's count is within the budget",
    "refused, over the budget, exact": "vLLM's count is over the budget",
    "refused, over the budget, estimated": "none: an estimate is only checked not to be below",
}


def compare_budgeted(
    route: str,
    body: Any,
    direct: Answer,
    through: Answer,
    line: dict[str, object],
    budget: int,
) -> tuple[str | None, Iterable[Disagreement]]:
    """What a sidecar with a prompt budget did with a body vLLM answered ``direct``, and the
    ways that broke the budget's promise: a refusal must name a budget vLLM's own count
    exceeds, and nothing over it may be forwarded. Checked where the budget applies to one
    prompt and vLLM reports it: the conversation routes."""
    unchecked: tuple[str | None, Iterable[Disagreement]] = (None, ())
    if through.status >= 500 and sidecar_refused(through):
        return None, [_row(route, body, direct, through, "sidecar 5xx of its own, budgets on")]
    if route not in CONVERSATION_FIELD or direct.status >= 300:
        return unchecked
    actual = _reported(route, direct)
    if actual is None:
        return unchecked
    if sidecar_refused(through) and line.get("reason") == BUDGET_REASON:
        if line.get("prompt_tokens_exact") is not True:
            return "refused, over the budget, estimated", ()
        if actual <= budget:
            rule = f"refused over the prompt budget {budget}, vLLM counts {actual}"
            return None, [_row(route, body, direct, through, rule)]
        return "refused, over the budget, exact", ()
    if sidecar_refused(through):
        rule = f"refused ({line.get('reason')}) with only a prompt budget on"
        return None, [_row(route, body, direct, through, rule)]
    if through.status < 300:
        if actual > budget:
            rule = f"forwarded {actual} prompt tokens past the budget {budget}"
            return None, [_row(route, body, direct, through, rule)]
        return "forwarded", ()
    return unchecked


def _row(route: str, body: Any, direct: Answer, through: Answer, rule: str) -> Disagreement:
    return Disagreement(
        route,
        rule,
        repr(body)[:160].replace("|", "\\|"),
        f"{direct.status} {direct.body[:120]!r}".replace("|", "\\|"),
        f"{through.status} {through.body[:120]!r}".replace("|", "\\|"),
        json.dumps(body, default=repr),
    )


def _reported(route: str, answer: Answer) -> int | None:
    try:
        return reported_prompt_tokens(route, answer)
    except (KeyError, TypeError, ValueError):
        return None


def run(
    spec: dict[str, Any],
    *,
    vllm_url: str,
    sidecar_url: str,
    model: str,
    log_line: Callable[[str], dict[str, object] | None],
    seconds_per_route: float,
    seed: int,
    max_examples_per_route: int = 10_000,
    budgeted_url: str | None = None,
    budgeted_log_line: Callable[[str], dict[str, object] | None] | None = None,
) -> Tally:
    """Draw and compare until each route's time is up; every disagreement is returned. With
    ``budgeted_url`` each body also goes through a sidecar with ``PROMPT_BUDGET``."""
    schema = schemathesis.openapi.from_dict(spec)
    tally = Tally()
    started = time.monotonic()
    rng = random.Random(seed)
    for route in inspected_routes(spec):
        draw = _drawer(route, schema[route]["POST"].as_strategy(), max_examples_per_route)
        deadline = time.monotonic() + seconds_per_route

        def exchange(body: Any, salt: int, route: str = route, *, drawn: bool = True) -> None:
            if drawn:
                body = shaped(route, body, model, random.Random(rng.random() + salt))
            payload = body if isinstance(body, dict) else _raw(body)
            request_id = f"differential-{seed}-{sum(tally.requests.values())}"
            direct = send(vllm_url, "POST", route, payload)
            through = send(sidecar_url, "POST", route, payload, {"x-request-id": request_id})
            tally.requests[route] += 1
            ours = "own 4xx" if sidecar_refused(through) else answer_class(through)
            tally.outcomes[(route, answer_class(direct), ours)] += 1
            tally.disagreements.extend(compare(route, body, direct, through, log_line, request_id))
            if budgeted_url is not None and budgeted_log_line is not None:
                budgeted_id = f"{request_id}-budgeted"
                budgeted = send(budgeted_url, "POST", route, payload, {"x-request-id": budgeted_id})
                line = budgeted_log_line(budgeted_id) or {}
                answer, found = compare_budgeted(route, body, direct, budgeted, line, PROMPT_BUDGET)
                if answer is not None:
                    tally.budget_checks[answer] += 1
                tally.disagreements.extend(found)

        route_started = time.monotonic()
        if budgeted_url is not None and route in CONVERSATION_FIELD:
            for anchor in budget_anchors(route, model):
                exchange(anchor, 0, drawn=False)
        with contextlib.suppress(_TimeUp):
            hypothesis_seed(seed)(draw)(exchange, deadline)
        tally.route_seconds[route] = time.monotonic() - route_started
    tally.seconds = time.monotonic() - started
    return tally


class _TimeUp(Exception):
    """A route's time is up: ends its drawing (hypothesis has no other early stop)."""


def _drawer(
    route: str, strategy: st.SearchStrategy[Any], max_examples: int
) -> Callable[[Callable[[Any, int], None], float], None]:
    """A Hypothesis test that hands each drawn body to ``exchange`` until ``deadline``."""

    @settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=strategy, salt=st.integers(0, 2**32 - 1))
    def draw(exchange: Callable[[Any, int], None], deadline: float, case: Any, salt: int) -> None:
        if time.monotonic() > deadline:
            raise _TimeUp(route)
        exchange(case.body, salt)

    return draw


def _raw(body: Any) -> bytes | None:
    """A drawn body that is not an object, as bytes: a bare JSON value, or no body at all
    (Schemathesis' marker for an operation drawn without one)."""
    if body is None or not isinstance(body, list | str | int | float | bool):
        return None
    return orjson.dumps(body)
