"""PromQL fragments for the dashboards: selectors scoped by the dashboard's variables.

The sidecar's series carry ``model``; Prometheus adds ``namespace`` and ``pod`` as target
labels (the Prometheus Operator does it for a ServiceMonitor or PodMonitor). vLLM runs in the
same pod, so its series are matched by ``namespace`` and ``pod`` alone: its ``model_name``
is the served name, which need not equal the sidecar's ``model`` label.
"""

from __future__ import annotations

from dashboards.grafana import Query

SIDECAR_SCOPE = 'namespace=~"$namespace", pod=~"$pod", model=~"$model"'
VLLM_SCOPE = 'namespace=~"$namespace", pod=~"$pod"'
RATE_WINDOW = "$__rate_interval"


def select(metric: str, *matchers: str, scope: str = SIDECAR_SCOPE) -> str:
    """``metric{scope, matchers...}``."""
    return f"{metric}{{{', '.join((scope, *matchers))}}}"


def rate(metric: str, *matchers: str, scope: str = SIDECAR_SCOPE) -> str:
    """Per-second rate over Grafana's rate interval."""
    return f"rate({select(metric, *matchers, scope=scope)}[{RATE_WINDOW}])"


def sum_rate(metric: str, *matchers: str, by: str = "", scope: str = SIDECAR_SCOPE) -> str:
    """``sum [by (...)] (rate(...))``."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} ({rate(metric, *matchers, scope=scope)})"


def quantile(q: float, histogram: str, *matchers: str, scope: str = SIDECAR_SCOPE) -> str:
    """The q-quantile of a histogram over every selected series."""
    buckets = sum_rate(f"{histogram}_bucket", *matchers, by="le", scope=scope)
    return f"histogram_quantile({q:g}, {buckets})"


def quantiles(
    histogram: str, *, prefix: str = "", qs: tuple[float, ...] = (0.5, 0.9, 0.99), scope: str = ""
) -> tuple[Query, ...]:
    """One query per quantile, legends ``p50``, ``p90``..."""
    return tuple(
        Query(
            quantile(q, histogram, scope=scope or SIDECAR_SCOPE),
            f"{prefix}p{round(q * 100):d}",
        )
        for q in qs
    )


def bucket_increase(histogram: str) -> str:
    """Observations per bucket in each interval, for a heatmap."""
    return f"sum by (le) (increase({select(histogram + '_bucket')}[{RATE_WINDOW}]))"


def mean(histogram: str) -> str:
    """Mean observation over the interval."""
    return f"{sum_rate(histogram + '_sum')} / {sum_rate(histogram + '_count')}"


def budget(gauge: str) -> Query:
    """A configured budget as a line; absent when unlimited (0)."""
    return Query(f"max({select(gauge)} > 0)", "budget")
