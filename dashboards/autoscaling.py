"""The autoscaling queries, defined once: KEDA's triggers, the Prometheus Adapter's rules and the
recording rules that ``promtool test rules`` proves them with are all built here.

Both signals are the router gauges (``observe.router_load``), so they see every queue in the
pod (the sidecar's and vLLM's) and the fuller view of the KV cache (the sidecar's in-flight
budget or vLLM's own usage), with or without a KV budget:

- requests waiting, summed over the pods: scale out at ``QUEUE_PER_REPLICA`` per replica;
- KV used, averaged over the pods: scale out above ``KV_USAGE`` (0.8).

Each pod's gauge goes through ``quantile_over_time(0.5, ...[window])`` first: its median over
the window, so a queue must stand for more than half the window (a minute of two) before it
counts, and one burst, however tall, moves nothing. Instant values (the queries before) scaled
out on a single scrape's burst and, with a 10-minute scale-down window, held the GPUs for ten.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

WAITING = "vlm_sidecar_effective_requests_waiting"
KV_USAGE_GAUGE = "vlm_sidecar_effective_kv_usage"
QUEUE_WINDOW = "2m"
KV_WINDOW = "3m"
QUEUE_PER_REPLICA = 2
KV_USAGE = 0.8
BY = "namespace, service"

WAITING_RECORD = "namespace_service:vlm_sidecar_effective_requests_waiting:sum_median2m"
KV_USAGE_RECORD = "namespace_service:vlm_sidecar_effective_kv_usage:avg_median3m"


def waiting_query(selector: str, by: str | None = None) -> str:
    """Requests waiting in the pods, each pod's median over the window, summed."""
    grouping = f" by ({by})" if by else ""
    series = f"{WAITING}{{{selector}}}" if selector else WAITING
    return f"sum{grouping} (quantile_over_time(0.5, {series}[{QUEUE_WINDOW}]))"


def kv_usage_query(selector: str, by: str | None = None) -> str:
    """KV used in the pods, each pod's median over the window, averaged."""
    grouping = f" by ({by})" if by else ""
    series = f"{KV_USAGE_GAUGE}{{{selector}}}" if selector else KV_USAGE_GAUGE
    return f"avg{grouping} (quantile_over_time(0.5, {series}[{KV_WINDOW}]))"


def adapter_query(series_query: str) -> str:
    """A Prometheus Adapter ``metricsQuery``: the same median, per pod."""
    name = WAITING if series_query == "waiting" else KV_USAGE_GAUGE
    window = QUEUE_WINDOW if series_query == "waiting" else KV_WINDOW
    return f"max(quantile_over_time(0.5, {name}{{<<.LabelMatchers>>}}[{window}])) by (<<.GroupBy>>)"


def rules_document() -> Json:
    """The recording rules equal to the KEDA queries, grouped by Service."""
    return {
        "groups": [
            {
                "name": "vlm-sidecar.autoscaling",
                "rules": [
                    {"record": WAITING_RECORD, "expr": waiting_query("", BY)},
                    {"record": KV_USAGE_RECORD, "expr": kv_usage_query("", BY)},
                ],
            }
        ]
    }


# --- promtool test rules ---------------------------------------------------------------------

SERVICE = {"namespace": "ml", "service": "vllm"}
SCRAPE = "15s"


def _series(name: str, pod: str, values: str) -> Json:
    labels = {**SERVICE, "pod": pod, "model": "qwen", "model_name": "Qwen/Qwen2.5-VL-7B-Instruct"}
    rendered = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{rendered}}}", "values": values}


def _value(expr: str, at: str, value: float) -> Json:
    labels = ", ".join(f'{key}="{val}"' for key, val in SERVICE.items())
    return {
        "expr": f"round({expr}, 0.001)",
        "eval_time": at,
        "exp_samples": [{"labels": f"{{{labels}}}", "value": value}],
    }


def _scale(expr: str, at: str, threshold: float, replicas: int, out: bool) -> Json:
    """Whether the signal asks for more than ``replicas``: ``ceil(signal / threshold)``, as
    KEDA and the HPA compute desired replicas (an average value per replica for the queue,
    the current value for the KV fraction at one replica)."""
    labels = ", ".join(f'{key}="{val}"' for key, val in SERVICE.items())
    return {
        "expr": f"ceil({expr} / {threshold}) > bool {replicas}",
        "eval_time": at,
        "exp_samples": [{"labels": f"{{{labels}}}", "value": 1 if out else 0}],
    }


def unit_tests_document(rules_file: str) -> Json:
    """Sustained queues and KV scale out; bursts under a minute do not (15 s scrapes)."""
    # Two pods, one sample every 15 s for 10 minutes (41 samples).
    quiet = "0x40"
    burst = "0x19 40 40 40 0x18"  # 45 s of 40 waiting at minute 5, then nothing
    sustained = "0x19 6x21"  # 6 waiting from minute 5 on
    return {
        "rule_files": [rules_file],
        "evaluation_interval": "15s",
        "tests": [
            {
                "name": "a queue that stands for two minutes scales out; its first minute does not",
                "interval": SCRAPE,
                "input_series": [
                    _series(WAITING, "vllm-0", sustained),
                    _series(WAITING, "vllm-1", sustained),
                ],
                "promql_expr_test": [
                    _value(WAITING_RECORD, "5m45s", 0),
                    _value(WAITING_RECORD, "7m", 12),
                    _scale(WAITING_RECORD, "5m45s", QUEUE_PER_REPLICA, 2, out=False),
                    _scale(WAITING_RECORD, "7m", QUEUE_PER_REPLICA, 2, out=True),
                ],
            },
            {
                "name": "a 45-second burst of 40 waiting requests never scales out",
                "interval": SCRAPE,
                "input_series": [
                    _series(WAITING, "vllm-0", burst),
                    _series(WAITING, "vllm-1", quiet),
                ],
                "promql_expr_test": [
                    *(_value(WAITING_RECORD, at, 0) for at in ("5m", "5m30s", "6m", "7m")),
                    *(
                        _scale(WAITING_RECORD, at, QUEUE_PER_REPLICA, 2, out=False)
                        for at in ("5m15s", "5m30s", "6m")
                    ),
                    # The instant query that the examples used before scaled out on it.
                    _value(f"sum by ({BY}) ({WAITING})", "5m15s", 40),
                ],
            },
            {
                "name": "KV held above 80 % scales out; a one-scrape spike to 100 % does not",
                "interval": SCRAPE,
                "input_series": [
                    _series(KV_USAGE_GAUGE, "vllm-0", "0.5x19 0.9x21"),
                    _series(KV_USAGE_GAUGE, "vllm-1", "0.5x19 0.9x21"),
                ],
                "promql_expr_test": [
                    _value(KV_USAGE_RECORD, "5m", 0.5),
                    _value(KV_USAGE_RECORD, "8m", 0.9),
                    _scale(KV_USAGE_RECORD, "5m", KV_USAGE, 1, out=False),
                    _scale(KV_USAGE_RECORD, "8m", KV_USAGE, 1, out=True),
                ],
            },
            {
                "name": "one scrape at 100 % KV among 50 % moves nothing",
                "interval": SCRAPE,
                "input_series": [
                    _series(KV_USAGE_GAUGE, "vllm-0", "0.5x19 1 0.5x20"),
                    _series(KV_USAGE_GAUGE, "vllm-1", "0.5x40"),
                ],
                "promql_expr_test": [
                    _value(KV_USAGE_RECORD, "5m", 0.5),
                    _value(KV_USAGE_RECORD, "6m", 0.5),
                    _scale(KV_USAGE_RECORD, "5m", KV_USAGE, 1, out=False),
                ],
            },
        ],
    }
