"""``promtool test rules`` cases: every alert fires on a series made to break it, renders its
summary as written here, and stays quiet on a healthy series and before its ``for`` elapses.

Input series use 1-minute samples, so rates over whole minutes are exact and the rendered
percentages and durations below are the real ones.
"""

from __future__ import annotations

from dashboards.rules import (
    ALERTS,
    IMAGE_TOKENS_OFF,
    REJECTION_RATIO,
    RELATIVE_ERROR,
    UPSTREAM_ERROR_RATIO,
    Json,
)

NAMESPACE, POD, MODEL = "ml", "vlm-0", "qwen2.5-vl-7b"
TARGET = {"namespace": NAMESPACE, "pod": POD, "model": MODEL, "job": "vlm-sidecar"}
SERVICE_LABELS = {"namespace": NAMESPACE, "model": MODEL}
SIDECAR_LABELS = {**SERVICE_LABELS, "pod": POD}
_BY_NAME = {alert.name: alert for alert in ALERTS}


def series(metric: str, values: str, **labels: str) -> Json:
    """One input series on the test target; ``labels`` add to or replace the target's."""
    merged = {**TARGET, **labels}
    rendered = ", ".join(f'{key}="{value}"' for key, value in merged.items())
    return {"series": f"{metric}{{{rendered}}}", "values": values}


def requests(decision: str, reason: str, values: str) -> Json:
    """An input series of ``vlm_sidecar_requests_total``."""
    return series(
        "vlm_sidecar_requests_total",
        values,
        route="chat_completions",
        decision=decision,
        reason=reason,
    )


def fires(name: str, at: str, summary: str, labels: Json) -> Json:
    """The alert is firing at ``at`` with this summary."""
    alert = _BY_NAME[name]
    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [
            {
                "exp_labels": {"severity": alert.severity, **labels},
                "exp_annotations": {"summary": summary, "description": alert.description},
            }
        ],
    }


def quiet(name: str, at: str) -> Json:
    """The alert is not firing at ``at``."""
    return {"eval_time": at, "alertname": name, "exp_alerts": []}


def value(expr: str, at: str, exact: float, labels: Json) -> Json:
    """A recording rule's value at ``at``, rounded to 1e-4."""
    rendered = ", ".join(f'{key}="{val}"' for key, val in labels.items())
    return {
        "expr": f"round({expr}, 0.0001)",
        "eval_time": at,
        "exp_samples": [{"labels": f"{{{rendered}}}", "value": exact}],
    }


def _rejections() -> list[Json]:
    name = "VlmSidecarHighRejectionRatio"
    return [
        {
            "name": "rejection ratio of 25 % fires after 15 minutes",
            "input_series": [
                requests("admit", "within_budget", "0+30x40"),
                requests("reject", "max_image_tokens", "0+10x40"),
                requests("reject", "client_disconnect", "0+0x40"),
            ],
            "alert_rule_test": [
                quiet(name, "10m"),
                fires(
                    name,
                    "20m",
                    f"vlm-sidecar rejects 25% of requests to {MODEL} in {NAMESPACE}.",
                    SERVICE_LABELS,
                ),
            ],
            "promql_expr_test": [value(REJECTION_RATIO, "20m", 0.25, SERVICE_LABELS)],
        },
        {
            "name": "4 % rejections, client disconnects and vLLM failures stay quiet",
            "input_series": [
                requests("admit", "within_budget", "0+48x40"),
                requests("reject", "max_image_pixels", "0+2x40"),
                requests("reject", "client_disconnect", "0+50x40"),
                requests("reject", "upstream_error", "0+50x40"),
            ],
            "alert_rule_test": [quiet(name, "30m")],
            "promql_expr_test": [value(REJECTION_RATIO, "30m", 0.0133, SERVICE_LABELS)],
        },
    ]


def _kv_budget() -> list[Json]:
    name = "VlmSidecarKvBudgetSaturated"
    budget = series("vlm_sidecar_kv_budget_bytes", "1000000000+0x30")
    return [
        {
            "name": "in-flight KV at 95 % of the budget fires after 15 minutes",
            "input_series": [series("vlm_sidecar_inflight_kv_bytes", "950000000+0x30"), budget],
            "alert_rule_test": [
                quiet(name, "10m"),
                fires(
                    name,
                    "20m",
                    f"In-flight KV budget of {POD} ({NAMESPACE}) is 95% used.",
                    SIDECAR_LABELS,
                ),
            ],
        },
        {
            "name": "80 % of the budget, or no budget at all, stays quiet",
            "input_series": [
                series("vlm_sidecar_inflight_kv_bytes", "800000000+0x30"),
                budget,
                series("vlm_sidecar_inflight_kv_bytes", "5000000000+0x30", pod="vlm-1"),
                series("vlm_sidecar_kv_budget_bytes", "0+0x30", pod="vlm-1"),
            ],
            "alert_rule_test": [quiet(name, "25m")],
        },
    ]


def _queue_wait() -> list[Json]:
    name = "VlmSidecarQueueWaitHigh"
    timeout = series("vlm_sidecar_queue_timeout_seconds", "10+0x30")

    def waits(slow_le: str, fast_le: str) -> list[Json]:
        bucket = "vlm_sidecar_queue_wait_seconds_bucket"
        return [
            series(bucket, "0+0x30", le=fast_le),
            series(bucket, "0+60x30", le=slow_le),
            series(bucket, "0+60x30", le="+Inf"),
            timeout,
        ]

    return [
        {
            "name": "p95 wait of 9.75 s against a 10 s timeout fires after 10 minutes",
            "input_series": waits("10.0", "5.0"),
            "alert_rule_test": [
                quiet(name, "8m"),
                fires(
                    name,
                    "15m",
                    f"Requests to {POD} ({NAMESPACE}) wait 9.75s (p95) for KV budget.",
                    SIDECAR_LABELS,
                ),
            ],
        },
        {
            "name": "p95 wait under a second stays quiet",
            "input_series": waits("1.0", "0.5"),
            "alert_rule_test": [quiet(name, "20m")],
        },
        {
            "name": "no request waiting stays quiet",
            "input_series": [
                series("vlm_sidecar_queue_wait_seconds_bucket", "0+0x30", le="+Inf"),
                timeout,
            ],
            "alert_rule_test": [quiet(name, "20m")],
        },
    ]


def _band_starving() -> list[Json]:
    name = "VlmSidecarBandStarving"
    timeout = series("vlm_sidecar_queue_timeout_seconds", "30+0x40")
    healthy = series("vlm_sidecar_band_oldest_wait_seconds", "0 2 0 1 0+0x36", band="10")

    def oldest(values: str) -> Json:
        return series("vlm_sidecar_band_oldest_wait_seconds", values, band="0")

    return [
        {
            "name": "a band whose oldest waiter keeps reaching 27 s of 30 fires after 10 minutes",
            # A sawtooth: each waiter times out at the peak, the next starts from zero.
            "input_series": [oldest("0 9 18 27 " * 10), healthy, timeout],
            "alert_rule_test": [
                quiet(name, "8m"),
                fires(
                    name,
                    "16m",
                    f"Band 0 of {POD} ({NAMESPACE}) has had a request waiting 90% of the "
                    "queue timeout.",
                    {**SIDECAR_LABELS, "band": "0"},
                ),
            ],
        },
        {
            "name": "short waits in every band stay quiet",
            "input_series": [oldest("0 3 1 0+0x37"), healthy, timeout],
            "alert_rule_test": [quiet(name, "20m")],
        },
    ]


def _prediction() -> list[Json]:
    under, over = "VlmSidecarPromptTokensUnderPredicted", "VlmSidecarPromptTokensOverPredicted"

    def tokens(observed: str, predicted: str) -> list[Json]:
        labels = {"route": "chat_completions"}
        return [
            series("vlm_sidecar_observed_prompt_tokens_sum", observed, **labels),
            series("vlm_sidecar_usage_predicted_prompt_tokens_total", predicted, **labels),
        ]

    return [
        {
            "name": "observed 10 % above the prediction fires under-prediction after 30 minutes",
            "input_series": tokens("0+1100x60", "0+1000x60"),
            "alert_rule_test": [
                quiet(under, "25m"),
                fires(
                    under,
                    "45m",
                    f"vLLM counts 10% more prompt tokens than vlm-sidecar "
                    f"predicts for {MODEL} in {NAMESPACE}.",
                    SERVICE_LABELS,
                ),
                quiet(over, "45m"),
            ],
            "promql_expr_test": [value(RELATIVE_ERROR, "45m", 0.1, SERVICE_LABELS)],
        },
        {
            "name": "observed half the prediction fires over-prediction after 30 minutes",
            "input_series": tokens("0+500x60", "0+1000x60"),
            "alert_rule_test": [
                quiet(over, "25m"),
                fires(
                    over,
                    "45m",
                    f"vlm-sidecar over-predicts prompt tokens for {MODEL} in "
                    f"{NAMESPACE} (relative error -50%).",
                    SERVICE_LABELS,
                ),
                quiet(under, "45m"),
            ],
            "promql_expr_test": [value(RELATIVE_ERROR, "45m", -0.5, SERVICE_LABELS)],
        },
        {
            "name": "observed 10 % under the prediction stays quiet",
            "input_series": tokens("0+900x60", "0+1000x60"),
            "alert_rule_test": [quiet(under, "50m"), quiet(over, "50m")],
        },
    ]


def _upstream() -> list[Json]:
    name = "VlmSidecarUpstreamErrors"

    def traffic(errors: str) -> list[Json]:
        return [
            series("vlm_sidecar_upstream_errors_total", errors, kind="connect"),
            requests("admit", "within_budget", "0+90x20"),
            requests("reject", "upstream_error", errors),
        ]

    return [
        {
            "name": "10 % of requests failing in vLLM fires after 5 minutes",
            "input_series": traffic("0+10x20"),
            "alert_rule_test": [
                quiet(name, "4m"),
                fires(
                    name,
                    "10m",
                    f"10% of requests to {MODEL} in {NAMESPACE} fail in vLLM.",
                    SERVICE_LABELS,
                ),
            ],
            "promql_expr_test": [value(UPSTREAM_ERROR_RATIO, "10m", 0.1, SERVICE_LABELS)],
        },
        {
            "name": "1 % of requests failing stays quiet",
            "input_series": traffic("0+1x20"),
            "alert_rule_test": [quiet(name, "15m")],
        },
    ]


def _rule_check() -> list[Json]:
    name = "VlmSidecarRuleCheckMismatch"
    return [
        {
            "name": "a self-check with 3 sizes off fires after 5 minutes",
            "input_series": [series("vlm_sidecar_rule_check_mismatches", "3+0x20")],
            "alert_rule_test": [
                quiet(name, "3m"),
                fires(
                    name,
                    "10m",
                    f"The rule of {POD} ({NAMESPACE}) disagrees with vLLM on 3 image sizes.",
                    SIDECAR_LABELS,
                ),
            ],
        },
        {
            "name": "a self-check that agrees stays quiet",
            "input_series": [series("vlm_sidecar_rule_check_mismatches", "0+0x20")],
            "alert_rule_test": [quiet(name, "15m")],
        },
    ]


def _image_drift() -> list[Json]:
    name = "VlmSidecarImageTokensDrift"

    def errors(exact: str, under: str, total: str) -> list[Json]:
        bucket = "vlm_sidecar_image_tokens_prediction_error_bucket"
        labels = {"route": "chat_completions"}
        return [
            series(bucket, under, le="-1.0", **labels),
            series(bucket, exact, le="0.0", **labels),
            series(bucket, total, le="+Inf", **labels),
            series("vlm_sidecar_image_tokens_prediction_error_count", total, **labels),
        ]

    return [
        {
            "name": "a fifth of the answers off fires after 30 minutes",
            # 100 answers a minute: 10 under-predicted, 80 exact, 10 over-predicted.
            "input_series": errors("0+90x60", "0+10x60", "0+100x60"),
            "alert_rule_test": [
                quiet(name, "25m"),
                fires(
                    name,
                    "50m",
                    f"20% of answers from {MODEL} in {NAMESPACE} place other image token "
                    "counts than vlm-sidecar predicts.",
                    SERVICE_LABELS,
                ),
            ],
            "promql_expr_test": [value(IMAGE_TOKENS_OFF, "50m", 0.2, SERVICE_LABELS)],
        },
        {
            "name": "every answer exact stays quiet",
            "input_series": errors("0+100x60", "0+0x60", "0+100x60"),
            "alert_rule_test": [quiet(name, "50m")],
        },
    ]


def unit_tests_document(rules_file: str) -> Json:
    """The ``promtool test rules`` file for ``rules_file`` (a path relative to it)."""
    return {
        "rule_files": [rules_file],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", **case}
            for case in (
                *_rejections(),
                *_kv_budget(),
                *_queue_wait(),
                *_band_starving(),
                *_prediction(),
                *_upstream(),
                *_rule_check(),
                *_image_drift(),
            )
        ],
    }
