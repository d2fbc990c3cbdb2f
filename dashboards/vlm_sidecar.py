"""The vlm-sidecar dashboard: decisions, predicted cost, the in-flight budget, images,
prediction against vLLM's usage, latency, and vLLM's own metrics beside the predictions.

Every panel's description says what it shows and, after "When it looks bad:", what to do.
"""

from __future__ import annotations

from dashboards.grafana import (
    Json,
    Layout,
    Panel,
    Query,
    dashboard,
    datasource_variable,
    heatmap,
    query_variable,
    stat,
    timeseries,
)
from dashboards.promql import (
    VLLM_SCOPE,
    bucket_increase,
    budget,
    mean,
    quantiles,
    select,
    sum_rate,
)

BAD = "When it looks bad: "
REJECTED = 'decision="reject", reason!~"client_disconnect|upstream_error"'
DOWNSCALED = 'decision="downscale"'


def describe(shows: str, bad: str) -> str:
    """A panel description: what it shows, then what to do when it looks bad."""
    return f"{shows}\n\n{BAD}{bad}"


def _decisions() -> tuple[Panel, ...]:
    requests = sum_rate("vlm_sidecar_requests_total")
    return (
        timeseries(
            "Requests by decision",
            describe(
                "Inspected requests per second by the sidecar's decision: admit (forwarded as "
                "sent), downscale (forwarded with smaller images), wait (queued for KV budget, "
                "then forwarded) and reject (answered with an error, never forwarded).",
                "a growing reject or wait band means budgets bind. Open 'Rejections by reason' "
                "to see which budget; for wait, see 'In-flight KV against the budget'.",
            ),
            Query(sum_rate("vlm_sidecar_requests_total", by="decision"), "{{decision}}"),
            unit="reqps",
            stacked=True,
            width=8,
        ),
        timeseries(
            "Rejections by reason",
            describe(
                "Rejected requests per second by reason: the budget that was broken "
                "(max_*), the in-flight budget (larger_than_kv_budget, queue_timeout, "
                "queue_full), bad input (invalid_*, body_too_large, remote_image), vLLM "
                "failures (upstream_error) and clients that left (client_disconnect).",
                "max_* reasons: clients send bigger images than the budget allows; enable "
                "SIDECAR_OVER_BUDGET_ACTION=downscale or raise the budget if vLLM has room. "
                "queue_timeout/queue_full: raise SIDECAR_KV_BUDGET_BYTES or add replicas. "
                "invalid_*: check client versions and the sidecar's log line for the message.",
            ),
            Query(
                sum_rate("vlm_sidecar_requests_total", 'decision="reject"', by="reason"),
                "{{reason}}",
            ),
            unit="reqps",
            stacked=True,
            width=8,
        ),
        timeseries(
            "Share of requests rejected and downscaled",
            describe(
                "Fraction of inspected requests the sidecar rejected (vLLM failures and "
                "client disconnects left out, as in the VlmSidecarHighRejectionRatio alert) "
                "and the fraction it downscaled.",
                "above 10 % rejected for long, the alert fires: read 'Rejections by reason'. A "
                "high downscale share costs CPU (see 'Downscale time') and answer quality; tell "
                "clients to send smaller images.",
            ),
            Query(f"{sum_rate('vlm_sidecar_requests_total', REJECTED)} / {requests}", "rejected"),
            Query(
                f"{sum_rate('vlm_sidecar_requests_total', DOWNSCALED)} / {requests}", "downscaled"
            ),
            unit="percentunit",
            minimum=0,
            thresholds=(("green", None), ("red", 0.1)),
            width=8,
        ),
    )


def _cost() -> tuple[Panel, ...]:
    return (
        timeseries(
            "Visual tokens per request",
            describe(
                "Predicted visual tokens per request as the client sent it (before any "
                "downscale), as quantiles, with SIDECAR_MAX_REQUEST_VISUAL_TOKENS when set.",
                "quantiles near the budget mean many requests are rejected or downscaled; a "
                "jump at p99 with a flat p50 is a few clients sending huge images: find them "
                "in the request.finished log lines by predicted_visual_tokens.",
            ),
            *quantiles("vlm_sidecar_request_visual_tokens"),
            budget("vlm_sidecar_budget_max_request_visual_tokens"),
            unit="short",
            log_scale=True,
        ),
        heatmap(
            "Visual tokens per request (heatmap)",
            describe(
                "How many requests fell in each visual-token bucket (16 to 131,072, doubling) "
                "in each interval.",
                "a second band high up is a new kind of client or image source; compare with "
                "'Image pixels' to see whether images got bigger or more numerous.",
            ),
            bucket_increase("vlm_sidecar_request_visual_tokens"),
        ),
        timeseries(
            "KV bytes per request",
            describe(
                "Predicted KV-cache bytes per request, per GPU, in whole blocks, for prompt "
                "plus max_tokens, with SIDECAR_MAX_REQUEST_KV_BYTES and the in-flight budget.",
                "p99 near the in-flight budget means single requests can fill it: they wait "
                "alone or are rejected as larger_than_kv_budget. Lower max_tokens defaults, "
                "set a per-request KV budget, or downscale.",
            ),
            *quantiles("vlm_sidecar_request_kv_bytes"),
            budget("vlm_sidecar_budget_max_request_kv_bytes"),
            Query(f"max({select('vlm_sidecar_kv_budget_bytes')} > 0)", "in-flight budget"),
            unit="bytes",
            log_scale=True,
        ),
        heatmap(
            "KV bytes per request (heatmap)",
            describe(
                "How many requests fell in each KV-bytes bucket (1 MiB to 256 GiB, doubling) "
                "in each interval.",
                "mass moving up without more images means longer prompts or larger max_tokens; "
                "check 'Prompt tokens per request' and the clients' max_tokens.",
            ),
            bucket_increase("vlm_sidecar_request_kv_bytes"),
            unit="bytes",
        ),
        timeseries(
            "Prompt tokens per request",
            describe(
                "Predicted prompt tokens (visual + template + text) per request as sent, with "
                "SIDECAR_MAX_REQUEST_PROMPT_TOKENS or vLLM's max_model_len.",
                "quantiles at the budget: vLLM would refuse these as too long anyway; raise "
                "--max-model-len only if the KV pool has room.",
            ),
            *quantiles("vlm_sidecar_request_prompt_tokens"),
            budget("vlm_sidecar_budget_max_request_prompt_tokens"),
            unit="short",
            log_scale=True,
            width=24,
        ),
    )


def _inflight() -> tuple[Panel, ...]:
    used = (
        f"{select('vlm_sidecar_inflight_kv_bytes')} / ({select('vlm_sidecar_kv_budget_bytes')} > 0)"
    )
    return (
        timeseries(
            "In-flight KV against the budget",
            describe(
                "Predicted KV bytes of the requests vLLM is serving now (per GPU), and "
                "SIDECAR_KV_BUDGET_BYTES, per pod.",
                "in flight pinned at the budget while the queue grows: the budget is the "
                "bottleneck. If vLLM's own KV usage (row below) is low at the same time, "
                "raise the budget (or use auto); if it is high, add replicas.",
            ),
            Query(f"sum by (pod) ({select('vlm_sidecar_inflight_kv_bytes')})", "{{pod}} in flight"),
            Query(f"sum by (pod) ({select('vlm_sidecar_kv_budget_bytes')} > 0)", "{{pod}} budget"),
            unit="bytes",
            minimum=0,
        ),
        timeseries(
            "KV budget used",
            describe(
                "In-flight predicted KV bytes as a fraction of the in-flight budget, per pod.",
                "above 90 % for 15 minutes fires VlmSidecarKvBudgetSaturated: new requests "
                "queue. Raise SIDECAR_KV_BUDGET_BYTES if vLLM has free KV, else scale out.",
            ),
            Query(f"max by (pod) ({used})", "{{pod}}"),
            unit="percentunit",
            minimum=0,
            thresholds=(("green", None), ("orange", 0.8), ("red", 0.9)),
        ),
        timeseries(
            "Queue depth and in-flight requests",
            describe(
                "Requests waiting for KV budget and requests holding a reservation, per pod.",
                "a queue that does not drain means requests will time out with 429 "
                "(queue_timeout) or be refused (queue_full): see 'Queue wait'.",
            ),
            Query(f"sum by (pod) ({select('vlm_sidecar_queue_depth')})", "{{pod}} waiting"),
            Query(f"sum by (pod) ({select('vlm_sidecar_inflight_requests')})", "{{pod}} in flight"),
            unit="short",
            minimum=0,
        ),
        timeseries(
            "Queue wait",
            describe(
                "Time requests waited for KV budget (only requests that waited, timeouts "
                "included), as quantiles, with SIDECAR_QUEUE_TIMEOUT_SECONDS.",
                "p95 above half the timeout fires VlmSidecarQueueWaitHigh: requests are close "
                "to a 429. Raise the budget if vLLM has room, else add replicas; clients "
                "see the wait as time to first token.",
            ),
            *quantiles("vlm_sidecar_queue_wait_seconds", qs=(0.5, 0.95, 0.99)),
            Query(f"max({select('vlm_sidecar_queue_timeout_seconds')})", "timeout"),
            unit="s",
            minimum=0,
        ),
        timeseries(
            "Queue by priority band",
            describe(
                "Per priority band (SIDECAR_OBJECTIVE_PRIORITIES; higher is served first): "
                "requests waiting, the oldest waiter's wait so far, and the p95 wait of "
                "requests that waited, with SIDECAR_QUEUE_TIMEOUT_SECONDS.",
                "a low band whose oldest wait climbs to the timeout while higher bands flow "
                "is starving (VlmSidecarBandStarving): raise its objective's priority, set "
                "SIDECAR_PRIORITY_AGING_SECONDS, or add replicas.",
            ),
            Query(
                f"sum by (band) ({select('vlm_sidecar_band_queue_depth')})",
                "band {{band}} waiting",
            ),
            Query(
                f"max by (band) ({select('vlm_sidecar_band_oldest_wait_seconds')})",
                "band {{band}} oldest wait (s)",
            ),
            Query(
                # Only bands with waits in the window: a quiet band's quantile is 0/0.
                "histogram_quantile(0.95, "
                f"{sum_rate('vlm_sidecar_band_queue_wait_seconds_bucket', by='band, le')})"
                " and on (band) "
                f"({sum_rate('vlm_sidecar_band_queue_wait_seconds_count', by='band')} > 0)",
                "band {{band}} p95 wait (s)",
            ),
            Query(f"max({select('vlm_sidecar_queue_timeout_seconds')})", "timeout (s)"),
            unit="short",
            minimum=0,
        ),
        timeseries(
            "Shed and refused by band",
            describe(
                "429s of the KV queue per second by band and reason: shed (a sheddable "
                "request that would have waited, or met a saturated vLLM), queue_timeout, "
                "queue_full; and tenants with a request waiting (the fairness view).",
                "shed is the intended first answer under load for negative bands; "
                "queue_timeout in a positive band means the budget cannot carry it: see "
                "'Queue by priority band'.",
            ),
            Query(
                sum_rate("vlm_sidecar_band_refusals_total", by="band, reason"),
                "band {{band}} {{reason}}",
            ),
            Query(f"sum({select('vlm_sidecar_fairness_tenants_waiting')})", "tenants waiting"),
            unit="short",
            minimum=0,
        ),
    )


def _images() -> tuple[Panel, ...]:
    return (
        heatmap(
            "Image pixels (heatmap)",
            describe(
                "Images per pixel-count bucket (0.01 to 50 megapixels) in each interval, as "
                "sent, after EXIF orientation.",
                "mass above SIDECAR_MAX_IMAGE_PIXELS is rejected or downscaled; many 12 MP+ "
                "photos mean clients upload camera originals: ask them to resize client-side.",
            ),
            bucket_increase("vlm_sidecar_image_pixels"),
        ),
        heatmap(
            "Image tokens (heatmap)",
            describe(
                "Images per predicted-token bucket (before downscale) in each interval.",
                "mass near the model's largest image ('Largest image' stat) means "
                "SIDECAR_MAX_IMAGE_TOKENS or max_pixels would save a lot of KV cache.",
            ),
            bucket_increase("vlm_sidecar_image_tokens"),
        ),
        timeseries(
            "Images per request",
            describe(
                "Images per request as quantiles, with SIDECAR_MAX_IMAGES_PER_REQUEST.",
                "p99 at the budget: some clients batch many images into one request and are "
                "rejected as max_images_per_request; they should split the request.",
            ),
            *quantiles("vlm_sidecar_request_images", qs=(0.5, 0.99)),
            budget("vlm_sidecar_budget_max_images_per_request"),
            unit="short",
            minimum=0,
            width=8,
        ),
        timeseries(
            "Images by format and source",
            describe(
                "Images per second by format and by source (inline data, remote URL, cache).",
                "'unknown' or 'other' formats are images whose header the sidecar could not "
                "read; url images are priced at the model's largest image unless "
                "SIDECAR_REMOTE_IMAGES=probe.",
            ),
            Query(
                sum_rate("vlm_sidecar_images_total", by="format, source"), "{{format}} {{source}}"
            ),
            unit="short",
            stacked=True,
            width=8,
        ),
        timeseries(
            "Downscale rate",
            describe(
                "Images rewritten smaller per second, and requests downscaled per second.",
                "a rising rate costs sidecar CPU and answer detail: check 'Downscale time' and "
                "SIDECAR_DOWNSCALE_WORKERS; if vLLM has room, raise the image budgets instead.",
            ),
            Query(sum_rate("vlm_sidecar_downscaled_images_total"), "images"),
            Query(sum_rate("vlm_sidecar_requests_total", DOWNSCALED), "requests"),
            unit="short",
            minimum=0,
            width=8,
        ),
        timeseries(
            "Downscale time",
            describe(
                "Time to decode, resize and re-encode one image, as quantiles.",
                "p99 over a second adds that to time to first token: add "
                "SIDECAR_DOWNSCALE_WORKERS (CPU permitting), or use "
                "SIDECAR_DOWNSCALE_METHOD=processor_kwargs to let vLLM resize.",
            ),
            *quantiles("vlm_sidecar_downscale_seconds", qs=(0.5, 0.99)),
            unit="s",
            minimum=0,
            width=24,
        ),
    )


def _prediction() -> tuple[Panel, ...]:
    observed = sum_rate("vlm_sidecar_observed_prompt_tokens_sum")
    answered = sum_rate("vlm_sidecar_observed_prompt_tokens_count")
    predicted = sum_rate("vlm_sidecar_usage_predicted_prompt_tokens_total")
    # Exact answers lie between the image-token error's le="-1.0" and le="0.0" buckets.
    image_error = "vlm_sidecar_image_tokens_prediction_error"
    exact_images = (
        sum_rate(image_error + "_bucket", 'le="0.0"', by="pod")
        + " - "
        + sum_rate(image_error + "_bucket", 'le="-1.0"', by="pod")
    )
    answered_images = sum_rate(image_error + "_count", by="pod")
    return (
        timeseries(
            "Predicted and observed prompt tokens",
            describe(
                "Mean prompt tokens per answered request: observed in vLLM's usage (JSON "
                "answers and the final stream chunk), and predicted for the same requests as "
                "forwarded.",
                "the lines part: the prediction drifts from what vLLM counts. See 'Prediction "
                "error' for the sign and the alerts VlmSidecarPromptTokensUnderPredicted and "
                "...OverPredicted for what to do.",
            ),
            Query(mean("vlm_sidecar_observed_prompt_tokens"), "observed"),
            Query(f"{predicted} / {answered}", "predicted"),
            unit="short",
            minimum=0,
            width=8,
        ),
        timeseries(
            "Prediction error",
            describe(
                "Observed minus predicted prompt tokens per request, as quantiles and mean: "
                "positive means vLLM used more than predicted (the budget under-counts), "
                "negative means the sidecar over-predicts (capacity left unused).",
                "positive and growing: vLLM's processor or chat template changed, or the "
                "profile's pixel limits differ from vLLM's --mm-processor-kwargs; check "
                "vision_rule in vlm_sidecar_model_info. Large negative: set "
                "SIDECAR_TEXT_CHARS_PER_TOKEN closer to the tokenizer, or "
                "SIDECAR_EXACT_TEXT_TOKENS=true.",
            ),
            *quantiles("vlm_sidecar_prompt_tokens_prediction_error", qs=(0.05, 0.5, 0.95)),
            Query(f"({observed} - {predicted}) / {answered}", "mean"),
            unit="short",
            width=8,
        ),
        timeseries(
            "Rule against vLLM",
            describe(
                "Per pod: image sizes on which the native rule and vLLM's /tokenize disagreed "
                "at the last self-check (start-up and every engine restart), and the share of "
                "answers whose image tokens (vLLM's --enable-prompt-tokens-details) were not "
                "exactly the prediction.",
                "mismatches above 0: read the sidecar's rule_check.mismatch log lines for both "
                "counts and the likely cause, usually SIDECAR_MAX_PIXELS or SIDECAR_MIN_PIXELS "
                "not equal to vLLM's --mm-processor-kwargs; set them, or price through vLLM "
                "with SIDECAR_PRICING=engine (VlmSidecarRuleCheckMismatch, "
                "VlmSidecarImageTokensDrift).",
            ),
            Query(
                f"max by (pod) ({select('vlm_sidecar_rule_check_mismatches')})",
                "{{pod}} sizes off at the last check",
            ),
            Query(f"1 - ({exact_images}) / {answered_images}", "{{pod}} answers off"),
            unit="short",
            minimum=0,
            width=24,
        ),
        timeseries(
            "Relative prediction error",
            describe(
                "All observed minus all predicted prompt tokens, over all predicted ones.",
                "above +5 % (under-prediction) the KV budget admits more than vLLM can hold: "
                "preemptions follow. Below -25 % the budget wastes capacity. Both alert after "
                "30 minutes.",
            ),
            Query(f"({observed} - {predicted}) / {predicted}", "relative error"),
            unit="percentunit",
            thresholds=(("red", None), ("green", -0.25), ("red", 0.05)),
            width=8,
        ),
    )


def _latency() -> tuple[Panel, ...]:
    return (
        timeseries(
            "Sidecar overhead",
            describe(
                "Arrival to upstream send, queue wait excluded: reading the body, probing "
                "images, pricing, deciding and any downscale, as quantiles.",
                "p99 above a few milliseconds without downscales: the sidecar is CPU-starved; "
                "raise its CPU request or limit. With downscales, see 'Downscale time'.",
            ),
            *quantiles("vlm_sidecar_overhead_seconds"),
            unit="s",
            minimum=0,
            width=6,
        ),
        timeseries(
            "Upstream time to first byte",
            describe(
                "Upstream send to vLLM's first response byte (prefill for streams), as quantiles.",
                "rising with vLLM's waiting requests: vLLM is overloaded and the sidecar's "
                "budget admits too much; lower SIDECAR_KV_BUDGET_BYTES or set the "
                "saturation thresholds.",
            ),
            *quantiles("vlm_sidecar_upstream_first_byte_seconds"),
            unit="s",
            minimum=0,
            width=6,
        ),
        timeseries(
            "Request duration",
            describe(
                "Arrival to the last byte relayed, for every inspected request, as quantiles.",
                "compare with time to first byte and queue wait to see where the time goes.",
            ),
            *quantiles("vlm_sidecar_request_duration_seconds"),
            unit="s",
            minimum=0,
            width=6,
        ),
        timeseries(
            "Upstream errors by kind",
            describe(
                "Failures talking to vLLM per second: connect (refused or closed before "
                "answering), timeout, reset (broke off mid-answer) and status_5xx.",
                "connect: vLLM is down or restarting, check its container and /health. "
                "status_5xx: read vLLM's log. reset: vLLM crashed mid-request (often out of "
                "memory). VlmSidecarUpstreamErrors fires above 5 % of requests.",
            ),
            Query(sum_rate("vlm_sidecar_upstream_errors_total", by="kind"), "{{kind}}"),
            unit="reqps",
            stacked=True,
            width=6,
        ),
    )


def _vllm() -> tuple[Panel, ...]:
    used = (
        f"{select('vlm_sidecar_inflight_kv_bytes')} / ({select('vlm_sidecar_kv_budget_bytes')} > 0)"
    )
    return (
        timeseries(
            "KV cache: vLLM usage and the sidecar's budget",
            describe(
                "vllm:kv_cache_usage_perc (blocks in use, 0-1) beside the sidecar's in-flight "
                "KV as a share of its budget, per pod.",
                "vLLM near 100 % while the sidecar's share is low: the prediction "
                "under-counts or the budget is above vLLM's pool; use "
                "SIDECAR_KV_BUDGET_BYTES=auto. The sidecar near 100 % while vLLM idles: the "
                "budget is too small.",
            ),
            Query(
                f"max by (pod) ({select('vllm:kv_cache_usage_perc', scope=VLLM_SCOPE)})",
                "{{pod}} vLLM",
            ),
            Query(f"max by (pod) ({used})", "{{pod}} sidecar"),
            unit="percentunit",
            minimum=0,
        ),
        timeseries(
            "Waiting requests: vLLM and the sidecar",
            describe(
                "vllm:num_requests_waiting beside the sidecar's queue depth, per pod.",
                "vLLM's queue growing while the sidecar's is empty: the budget lets too much "
                "through; lower SIDECAR_KV_BUDGET_BYTES or set "
                "SIDECAR_SATURATION_WAITING_REQUESTS so requests wait in the sidecar instead.",
            ),
            Query(
                f"sum by (pod) ({select('vllm:num_requests_waiting', scope=VLLM_SCOPE)})",
                "{{pod}} vLLM",
            ),
            Query(f"sum by (pod) ({select('vlm_sidecar_queue_depth')})", "{{pod}} sidecar"),
            unit="short",
            minimum=0,
        ),
        timeseries(
            "vLLM preemptions",
            describe(
                "vllm:num_preemptions_total per second: requests vLLM evicted from the KV "
                "cache to make room, per pod.",
                "any steady rate means vLLM admitted more than its KV cache holds: lower "
                "SIDECAR_KV_BUDGET_BYTES (or the auto fraction) and check 'Relative prediction "
                "error' for under-prediction.",
            ),
            Query(sum_rate("vllm:num_preemptions_total", by="pod", scope=VLLM_SCOPE), "{{pod}}"),
            unit="short",
            minimum=0,
        ),
        timeseries(
            "Prompt tokens: vLLM against the prediction",
            describe(
                "Median and p99 prompt tokens per request from vllm:request_prompt_tokens "
                "beside the sidecar's predicted prompt tokens (as sent).",
                "vLLM's quantiles above the prediction: under-prediction (see 'Prediction "
                "error'). Well below: many requests are rejected or downscaled before vLLM, "
                "or the text estimate is conservative.",
            ),
            *quantiles(
                "vllm:request_prompt_tokens", prefix="vLLM ", qs=(0.5, 0.99), scope=VLLM_SCOPE
            ),
            *quantiles("vlm_sidecar_request_prompt_tokens", prefix="predicted ", qs=(0.5, 0.99)),
            unit="short",
            log_scale=True,
        ),
    )


def _configuration() -> tuple[Panel, ...]:
    return (
        stat(
            "KV bytes per token",
            describe(
                "The active model profile's KV-cache bytes per token, per GPU.",
                "if it differs from vLLM's (check kv_cache_dtype and tensor parallel size), "
                "every KV prediction is off by the same factor: fix SIDECAR_KV_CACHE_DTYPE / "
                "SIDECAR_TENSOR_PARALLEL_SIZE.",
            ),
            Query(f"max({select('vlm_sidecar_model_kv_bytes_per_token')})", "bytes per token"),
            unit="bytes",
        ),
        stat(
            "Largest image",
            describe(
                "Tokens of the largest image the model's processor produces (the price of a "
                "remote image that is not probed).",
                "if vLLM runs with --mm-processor-kwargs max_pixels, set SIDECAR_MAX_PIXELS to "
                "the same value or predictions run high.",
            ),
            Query(f"max({select('vlm_sidecar_model_max_image_tokens')})", "tokens"),
        ),
        stat(
            "In-flight KV budget",
            describe(
                "SIDECAR_KV_BUDGET_BYTES now (auto budgets follow vLLM's pool); 0 means off.",
                "0 while vLLM is preempting: turn the budget on (auto is a good start).",
            ),
            Query(f"max({select('vlm_sidecar_kv_budget_bytes')})", "budget"),
            unit="bytes",
        ),
        stat(
            "Sidecars",
            describe(
                "Sidecar processes reporting, by model profile.",
                "fewer than vLLM replicas: a pod runs without its sidecar or is not scraped; "
                "check the ServiceMonitor and the pod's containers.",
            ),
            Query(f"count({select('vlm_sidecar_model_info')})", "sidecars"),
        ),
    )


def build() -> Json:
    """The dashboard document."""
    layout = Layout()
    layout.row("Admission decisions", *_decisions())
    layout.row("Predicted cost per request", *_cost())
    layout.row("In-flight KV budget and queue", *_inflight())
    layout.row("Images", *_images())
    layout.row("Prediction against vLLM's usage", *_prediction())
    layout.row("Latency and upstream errors", *_latency())
    layout.row("vLLM beside the predictions", *_vllm())
    layout.row("Configuration", *_configuration())
    selector = "vlm_sidecar_model_info"
    return dashboard(
        uid="vlm-sidecar",
        title="vLLM VLM sidecar",
        description=(
            "Admission decisions, predicted image cost and KV budget of vlm-sidecar, beside "
            "vLLM's own metrics. Generated by dashboards/generate.py; do not edit by hand."
        ),
        tags=["vlm-sidecar", "vllm"],
        variables=[
            datasource_variable(),
            query_variable("namespace", "Namespace", f"label_values({selector}, namespace)"),
            query_variable(
                "pod", "Pod", f'label_values({selector}{{namespace=~"$namespace"}}, pod)'
            ),
            query_variable(
                "model",
                "Model",
                f'label_values({selector}{{namespace=~"$namespace", pod=~"$pod"}}, model)',
            ),
        ],
        layout=layout,
    )
