"""Recording rules, alerts and their ``promtool test rules`` cases, as data.

Alerts aggregate by ``namespace`` and ``model`` (service level) or by ``namespace``, ``pod``
and ``model`` (one sidecar's budget and queue). Each alert's ``expr`` is ``signal op
threshold``, so the Prometheus integration test can evaluate the signal on its own and see
that it returns data even when the alert does not fire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]

SERVICE = "namespace, model"
SIDECAR = "namespace, pod, model"
REJECTED = 'decision="reject", reason!~"client_disconnect|upstream_error"'

REQUESTS = "namespace_model:vlm_sidecar_requests:rate5m"
REJECTION_RATIO = "namespace_model:vlm_sidecar_rejection_ratio:rate5m"
UPSTREAM_ERROR_RATIO = "namespace_model:vlm_sidecar_upstream_error_ratio:rate5m"
RELATIVE_ERROR = "namespace_model:vlm_sidecar_prompt_tokens_relative_error:rate30m"
IMAGE_TOKENS_OFF = "namespace_model:vlm_sidecar_image_tokens_off:ratio_rate30m"
KV_BUDGET_USED = "namespace_pod_model:vlm_sidecar_kv_budget_used:ratio_avg5m"
QUEUE_WAIT_P95 = "namespace_pod_model:vlm_sidecar_queue_wait_seconds:p95_rate5m"
# The oldest waiter of each band, at its peak over 2 minutes (it falls to 0 whenever that
# waiter is granted or times out), as a fraction of the queue timeout.
BAND_STARVING = (
    f"max by ({SIDECAR}, band) (max_over_time(vlm_sidecar_band_oldest_wait_seconds[2m])) "
    f"/ on ({SIDECAR}) group_left max by ({SIDECAR}) (vlm_sidecar_queue_timeout_seconds)"
)


@dataclass(frozen=True, slots=True)
class Record:
    """A recording rule."""

    record: str
    expr: str


@dataclass(frozen=True, slots=True)
class Alert:
    """An alerting rule: fires while ``signal op threshold`` holds for ``for_``."""

    name: str
    signal: str
    op: str
    threshold: str
    for_: str
    severity: str
    summary: str
    description: str

    @property
    def expr(self) -> str:
        return f"{self.signal} {self.op} {self.threshold}"


def _sum_rate(metric: str, window: str) -> str:
    return f"sum by ({SERVICE}) (rate({metric}[{window}]))"


PREDICTED = _sum_rate("vlm_sidecar_usage_predicted_prompt_tokens_total", "30m")
_IMAGE_ERROR_BUCKET = "vlm_sidecar_image_tokens_prediction_error_bucket"
IMAGE_ERROR_EXACT = (
    _sum_rate(_IMAGE_ERROR_BUCKET + '{le="0.0"}', "30m")
    + " - "
    + _sum_rate(_IMAGE_ERROR_BUCKET + '{le="-1.0"}', "30m")
)

RECORDS = (
    Record(
        REQUESTS,
        "sum by (namespace, model, decision, reason) (rate(vlm_sidecar_requests_total[5m]))",
    ),
    Record(
        REJECTION_RATIO,
        f"sum by ({SERVICE}) ({REQUESTS}{{{REJECTED}}}) / sum by ({SERVICE}) ({REQUESTS})",
    ),
    Record(
        UPSTREAM_ERROR_RATIO,
        f"{_sum_rate('vlm_sidecar_upstream_errors_total', '5m')} / sum by ({SERVICE}) ({REQUESTS})",
    ),
    Record(
        RELATIVE_ERROR,
        f"({_sum_rate('vlm_sidecar_observed_prompt_tokens_sum', '30m')} - {PREDICTED}) "
        f"/ {PREDICTED}",
    ),
    Record(
        # Answers whose image tokens were not exactly the prediction: the error's histogram
        # holds exact answers between its le="-1.0" and le="0.0" buckets.
        IMAGE_TOKENS_OFF,
        f"1 - ({IMAGE_ERROR_EXACT}) / "
        f"{_sum_rate('vlm_sidecar_image_tokens_prediction_error_count', '30m')}",
    ),
    Record(
        KV_BUDGET_USED,
        f"max by ({SIDECAR}) (avg_over_time(vlm_sidecar_inflight_kv_bytes[5m]) "
        "/ (vlm_sidecar_kv_budget_bytes > 0))",
    ),
    Record(
        QUEUE_WAIT_P95,
        f"histogram_quantile(0.95, sum by ({SIDECAR}, le) "
        "(rate(vlm_sidecar_queue_wait_seconds_bucket[5m])))",
    ),
)

WHERE = "{{ $labels.model }} in {{ $labels.namespace }}"
POD = "{{ $labels.pod }} ({{ $labels.namespace }})"

ALERTS = (
    Alert(
        "VlmSidecarHighRejectionRatio",
        REJECTION_RATIO,
        ">",
        "0.1",
        "15m",
        "warning",
        f"vlm-sidecar rejects {{{{ $value | humanizePercentage }}}} of requests to {WHERE}.",
        "More than 10 % of inspected requests were answered with an error by the sidecar "
        "(vLLM failures and client disconnects not counted) for 15 minutes. Open the "
        "dashboard's 'Rejections by reason'. max_* reasons: clients send more or bigger "
        "images than the budgets allow; turn on SIDECAR_OVER_BUDGET_ACTION=downscale or raise "
        "the budget if vLLM has KV room. queue_timeout/queue_full: the in-flight KV budget "
        "is too small for the load; raise it or add replicas. invalid_*: broken clients.",
    ),
    Alert(
        "VlmSidecarKvBudgetSaturated",
        KV_BUDGET_USED,
        ">",
        "0.9",
        "15m",
        "warning",
        f"In-flight KV budget of {POD} is {{{{ $value | humanizePercentage }}}} used.",
        "Requests in flight have held more than 90 % of SIDECAR_KV_BUDGET_BYTES on average "
        "for 15 minutes, so new requests queue. If vLLM's vllm:kv_cache_usage_perc is low "
        "at the same time, raise the budget (or use auto); if vLLM is full too, add replicas.",
    ),
    Alert(
        "VlmSidecarQueueWaitHigh",
        QUEUE_WAIT_P95,
        ">",
        f"0.5 * max by ({SIDECAR}) (vlm_sidecar_queue_timeout_seconds)",
        "10m",
        "warning",
        f"Requests to {POD} wait {{{{ $value | humanizeDuration }}}} (p95) for KV budget.",
        "The 95th percentile wait for KV budget has been above half of "
        "SIDECAR_QUEUE_TIMEOUT_SECONDS for 10 minutes: requests are close to being refused "
        "with 429 (queue_timeout), and clients see the wait as time to first token. Raise "
        "the budget if vLLM has room, otherwise add replicas.",
    ),
    Alert(
        "VlmSidecarBandStarving",
        BAND_STARVING,
        ">",
        "0.5",
        "10m",
        "warning",
        f"Band {{{{ $labels.band }}}} of {POD} has had a request waiting "
        "{{ $value | humanizePercentage }} of the queue timeout.",
        "For 10 minutes the oldest waiter of one priority band has reached more than half of "
        "SIDECAR_QUEUE_TIMEOUT_SECONDS within every 2 minutes: higher bands (served strictly "
        "first) or the band's own load take the whole KV budget, so this band times out "
        "with 429 (see vlm_sidecar_band_refusals_total). Give the band's objective a higher "
        "priority, set SIDECAR_PRIORITY_AGING_SECONDS so old waiters go first, or add "
        "replicas.",
    ),
    Alert(
        "VlmSidecarPromptTokensUnderPredicted",
        RELATIVE_ERROR,
        ">",
        "0.05",
        "30m",
        "warning",
        f"vLLM counts {{{{ $value | humanizePercentage }}}} more prompt tokens than "
        f"vlm-sidecar predicts for {WHERE}.",
        "Observed prompt tokens (vLLM's usage) exceed the prediction by more than 5 % over "
        "30 minutes, so the KV budget admits more than it should and vLLM may preempt. "
        "Usual causes: vLLM's --mm-processor-kwargs (min/max_pixels) differ from "
        "SIDECAR_MIN_PIXELS/SIDECAR_MAX_PIXELS, a new chat template, or a model upgrade "
        "without a new profile. Compare vision_rule in vlm_sidecar_model_info with vLLM's "
        "configuration.",
    ),
    Alert(
        "VlmSidecarPromptTokensOverPredicted",
        RELATIVE_ERROR,
        "<",
        "-0.25",
        "30m",
        "info",
        f"vlm-sidecar over-predicts prompt tokens for {WHERE} "
        "(relative error {{ $value | humanizePercentage }}).",
        "The prediction exceeds vLLM's observed prompt tokens by more than 25 % over 30 "
        "minutes: budgets reject or queue requests vLLM could serve. The text estimate is "
        "conservative by design; set SIDECAR_TEXT_CHARS_PER_TOKEN closer to the tokenizer, "
        "set SIDECAR_EXACT_TEXT_TOKENS=true, or check that SIDECAR_MAX_PIXELS is not above "
        "vLLM's.",
    ),
    Alert(
        "VlmSidecarRuleCheckMismatch",
        f"max by ({SIDECAR}) (vlm_sidecar_rule_check_mismatches)",
        ">",
        "0",
        "5m",
        "warning",
        f"The rule of {POD} disagrees with vLLM on {{{{ $value }}}} image sizes.",
        "The start-up self-check priced its test sizes through the native rule and through "
        "vLLM's /tokenize and they differ, so every budget is enforced on wrong numbers "
        "(unless SIDECAR_RULE_MISMATCH=engine switched pricing to vLLM's counts). The "
        "sidecar's rule_check.mismatch log lines give both counts and the likely cause: "
        "usually vLLM's --mm-processor-kwargs min_pixels/max_pixels differ from "
        "SIDECAR_MIN_PIXELS/SIDECAR_MAX_PIXELS, or the model or chat template changed.",
    ),
    Alert(
        "VlmSidecarImageTokensDrift",
        IMAGE_TOKENS_OFF,
        ">",
        "0.05",
        "30m",
        "warning",
        f"{{{{ $value | humanizePercentage }}}} of answers from {WHERE} place other image "
        "token counts than vlm-sidecar predicts.",
        "vLLM's usage.prompt_tokens_details (--enable-prompt-tokens-details) reports image "
        "tokens that differ from the prediction on more than 5 % of answers for 30 minutes: "
        "the rule drifts from the engine on live traffic. Check the self-check "
        "(vlm_sidecar_rule_check_mismatches and its log lines), compare vLLM's "
        "--mm-processor-kwargs with SIDECAR_MIN_PIXELS/SIDECAR_MAX_PIXELS, or price through "
        "vLLM with SIDECAR_PRICING=engine.",
    ),
    Alert(
        "VlmSidecarUpstreamErrors",
        UPSTREAM_ERROR_RATIO,
        ">",
        "0.05",
        "5m",
        "critical",
        f"{{{{ $value | humanizePercentage }}}} of requests to {WHERE} fail in vLLM.",
        "More than 5 % of inspected requests failed talking to vLLM for 5 minutes (refused, "
        "timed out, broken off, or 5xx). See 'Upstream errors by kind': connect means vLLM is "
        "down or restarting (check its container and /health), reset often means it ran out "
        "of memory, status_5xx is in vLLM's log.",
    ),
)


def rules_document() -> Json:
    """The plain Prometheus rules file (``groups:``)."""
    return {
        "groups": [
            {
                "name": "vlm-sidecar.recording",
                "rules": [{"record": r.record, "expr": r.expr} for r in RECORDS],
            },
            {
                "name": "vlm-sidecar.alerts",
                "rules": [
                    {
                        "alert": a.name,
                        "expr": a.expr,
                        "for": a.for_,
                        "labels": {"severity": a.severity},
                        "annotations": {"summary": a.summary, "description": a.description},
                    }
                    for a in ALERTS
                ],
            },
        ]
    }


def prometheus_rule_document() -> Json:
    """The same groups as a Prometheus Operator ``PrometheusRule``."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "vlm-sidecar",
            "labels": {
                "app.kubernetes.io/name": "vlm-sidecar",
                "app.kubernetes.io/part-of": "vlm-sidecar",
            },
        },
        "spec": rules_document(),
    }
