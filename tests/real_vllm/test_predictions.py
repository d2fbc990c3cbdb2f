"""The sidecar's prompt-token prediction against real vLLM's own count, route by route.

Every request goes through the sidecar; the prediction is its ``x-vlm-sidecar-prompt-tokens``
header and its ``request.finished`` line, vLLM's count is what the answer reports (``usage``,
``count_tokens``' ``input_tokens``, ``/tokenize``'s ``count``, the render routes' token ids) or,
for a stream the client asked no usage for, the usage the sidecar asked for itself and logged
(``SIDECAR_FORCE_STREAM_USAGE``). The last test reads the calibration histogram that all of
them fed: every observation must be an error of zero.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.real_vllm.cases import Case, engine_cases
from tests.real_vllm.client import get_text, reported_prompt_tokens, send
from tests.real_vllm.conftest import Row, Stack

PLACEHOLDER_MODEL = "<served model>"
CASES = engine_cases(PLACEHOLDER_MODEL)


def with_model(body: dict[str, Any], model: str) -> dict[str, Any]:
    return {key: model if value == PLACEHOLDER_MODEL else value for key, value in body.items()}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_predicted_prompt_tokens_are_vllms(stack: Stack, case: Case, report: list[Row]) -> None:
    request_id = f"engine-{stack.name}-{case.name}"
    answer = send(
        stack.sidecar.base_url,
        "POST",
        case.route,
        with_model(case.body, stack.model),
        {"x-request-id": request_id, **case.headers},
    )
    assert answer.status == 200, answer.body[:500]
    predicted = answer.predicted_prompt_tokens
    actual = reported_prompt_tokens(case.route, answer)
    line = stack.log_record(request_id)
    observed = line.get("observed_prompt_tokens")
    note = case.note
    if actual is None:  # the client asked for no usage: the sidecar's forced count
        actual = observed if isinstance(observed, int) else None
        note = note or "vLLM's count from the sidecar's log line"
    report.append(Row(stack.name, case.name, case.route, predicted, actual, note))
    assert actual is not None, "vLLM reported no prompt count"
    assert line.get("predicted_prompt_tokens") == predicted
    if observed is not None:
        assert observed == actual  # the sidecar read the usage the client got
    assert predicted == actual


def test_calibration_histogram_reads_zero_error(stack: Stack) -> None:
    """``vlm_sidecar_prompt_tokens_prediction_error``, fed by every answer with usage above:
    all of each route's observations fall in the bucket ``(-1, 0]`` (errors are whole tokens)."""
    buckets: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(get_text(stack.metrics_url)):
        if family.name != "vlm_sidecar_prompt_tokens_prediction_error":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                route = sample.labels["route"]
                bound = float(sample.labels["le"])
                buckets.setdefault(route, {})[bound] = sample.value
    observed = {route: counts[float("inf")] for route, counts in buckets.items()}
    assert observed.get("chat_completions", 0) > 0, "no calibrated chat answers"
    wrong = {}
    for route, counts in buckets.items():
        total = counts[float("inf")]
        at_most_zero = counts.get(0.0, 0.0)
        below_zero = max((n for bound, n in counts.items() if bound < 0), default=0.0)
        if total and (at_most_zero != total or below_zero != 0):
            wrong[route] = {
                "observations": total,
                "predicted too high": below_zero,
                "predicted too low": total - at_most_zero,
            }
    assert not wrong, f"prediction errors by route: {wrong}"
