"""Smoke run: real vLLM (CPU) with the tiny Qwen2.5-VL, first alone, then behind the sidecar.

    .venv/bin/python -m tests.real_vllm.smoke [model-name] [--render]

Uses the official ``openai`` and ``anthropic`` SDKs (``install.py sdks`` puts them in
``.venv``) on the four inspected routes, streaming and not, text and inline PNG images.

1. Direct to vLLM: ``usage`` prompt tokens of every case (the truth).
2. Through ``vlm-sidecar serve`` (env vars only, ``SIDECAR_KV_BUDGET_BYTES=auto``): the
   ``x-vlm-sidecar-prompt-tokens`` header (the prediction), the relayed usage, and the
   sidecar's own ``request.finished`` log line (``predicted_prompt_tokens``,
   ``observed_prompt_tokens``), matched by ``x-request-id``.

3. With ``--render``: the same bodies through vLLM 0.33's GPU-less ``/render`` routes
   (``renderer.py``), the renderer tier's token count, as one more column.

Prints a table (markdown) of predicted vs actual per case. "Actual" is the full prompt:
``prompt_tokens`` for chat and completions, ``input_tokens`` for Responses (it includes cached
tokens), and ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` for
Messages (its ``input_tokens`` excludes cached ones). The sidecar is not changed by this
script: mismatches are reported, not fixed.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import openai

from tests.real_vllm.cases import Case, smoke_cases
from tests.real_vllm.engine import LOG_DIR, SidecarServer, VllmServer
from tests.real_vllm.models import ensure_built

PREDICTED_HEADER = "x-vlm-sidecar-prompt-tokens"


def _usage_prompt(usage: Any, route: str) -> int | None:
    """The full prompt length from a usage object of any of the four APIs."""
    if usage is None:
        return None
    if route == "/v1/messages":
        return int(
            (usage.input_tokens or 0)
            + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
            + (getattr(usage, "cache_read_input_tokens", 0) or 0)
        )
    if route == "/v1/responses":
        return int(usage.input_tokens)
    return int(usage.prompt_tokens)


def _stream_usage(stream: Any, route: str) -> Any:
    usage = None
    for event in stream:
        kind = getattr(event, "type", None)
        if route == "/v1/responses":
            if kind in ("response.completed", "response.incomplete"):
                usage = event.response.usage
        elif route == "/v1/messages":
            if kind == "message_start":
                usage = event.message.usage
        elif getattr(event, "usage", None) is not None:
            usage = event.usage
    return usage


def send(base_url: str, case: Case, request_id: str) -> tuple[int | None, dict[str, str], float]:
    """Send ``case`` with the matching SDK; return (actual prompt tokens, headers, seconds)."""
    headers = {"x-request-id": request_id} | case.headers
    body = dict(case.body)
    started = time.monotonic()
    if case.route == "/v1/messages":
        client: Any = anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0)
        raw = client.messages.with_raw_response.create(**body, extra_headers=headers)
    else:
        client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
        endpoint = {
            "/v1/chat/completions": client.chat.completions,
            "/v1/completions": client.completions,
            "/v1/responses": client.responses,
        }[case.route]
        raw = endpoint.with_raw_response.create(**body, extra_headers=headers)
    parsed = raw.parse()
    usage = _stream_usage(parsed, case.route) if case.stream else parsed.usage
    seconds = time.monotonic() - started
    return _usage_prompt(usage, case.route), dict(raw.headers), seconds


def _metric(url: str, name: str) -> list[str]:
    with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310
        text = reply.read().decode()
    return [line for line in text.splitlines() if line.startswith(name)]


def _wait_for_budget(sidecar: SidecarServer, timeout: float = 30.0) -> str:
    url = f"http://127.0.0.1:{sidecar.metrics_port}/metrics"
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = _metric(url, "vlm_sidecar_kv_budget_bytes")
        if any(not line.rstrip().endswith(" 0.0") for line in lines):
            break
        time.sleep(0.5)
    return "; ".join(lines)


def run(name: str, *, render: bool = False) -> dict[str, Any]:
    directory = ensure_built(name)
    results: dict[str, Any] = {"model": name, "cases": []}
    with VllmServer(directory) as engine:
        results["vllm_ready_seconds"] = round(engine.startup_seconds or 0, 1)
        results["vllm_rss_gib"] = round(engine.rss_bytes() / 2**30, 2)
        cache_info = _metric(engine.base_url + "/metrics", "vllm:cache_config_info")
        results["cache_config_info"] = cache_info
        cases = smoke_cases(engine.served_name)
        direct: dict[str, int | None] = {}
        for case in cases:
            try:
                tokens, _, seconds = send(engine.base_url, case, f"direct-{case.name}")
            except (openai.APIError, anthropic.APIError) as exc:
                tokens, seconds = None, 0.0
                print(f"direct  {case.name:32} ERROR {exc!r:.300}", flush=True)
            direct[case.name] = tokens
            print(f"direct  {case.name:32} prompt_tokens={tokens}  {seconds:.2f}s", flush=True)
        sidecar_env = {
            "SIDECAR_KV_BUDGET_BYTES": "auto",  # and the block size: vLLM's own, 128 on CPU
            "SIDECAR_ENGINE_POLL_SECONDS": "2",
            "SIDECAR_MAX_IMAGES_PER_REQUEST": "4",
            # Streams without include_usage still report observed tokens in the log line.
            "SIDECAR_FORCE_STREAM_USAGE": "true",
        }
        with SidecarServer(engine.base_url, directory, env=sidecar_env) as sidecar:
            results["sidecar_ready_seconds"] = round(sidecar.startup_seconds or 0, 1)
            results["sidecar_kv_budget"] = _wait_for_budget(sidecar)
            for case in cases:
                request_id = f"smoke-{case.name}"
                try:
                    tokens, headers, seconds = send(sidecar.base_url, case, request_id)
                    error = None
                except (openai.APIError, anthropic.APIError) as exc:
                    tokens, headers, seconds, error = None, {}, 0.0, repr(exc)[:300]
                predicted = headers.get(PREDICTED_HEADER)
                row = {
                    "case": case.name,
                    "route": case.route,
                    "stream": case.stream,
                    "note": case.note,
                    "direct": direct[case.name],
                    "via_sidecar": tokens,
                    "predicted_header": int(predicted) if predicted else None,
                    "decision": headers.get("x-vlm-sidecar-decision"),
                    "error": error,
                }
                results["cases"].append(row)
                print(f"sidecar {case.name:32} actual={tokens} predicted={predicted}", flush=True)
            time.sleep(0.5)  # the last log line is written after the response ends
            logs = {r.get("request_id"): r for r in sidecar.log_records()}
            for row in results["cases"]:
                log = logs.get(f"smoke-{row['case']}", {})
                row["log_predicted"] = log.get("predicted_prompt_tokens")
                row["log_observed"] = log.get("observed_prompt_tokens")
            results["sidecar_log"] = str(sidecar.log_path)
    if render:
        _render_pass(directory, cases, results)
    return results


def _render_pass(directory: Path, cases: list[Case], results: dict[str, Any]) -> None:
    """The same bodies through vLLM 0.33's ``/render`` routes (``.tools/vllm-render``)."""
    from tests.real_vllm.renderer import RenderServer, token_ids

    with RenderServer(directory) as server:
        results["render_ready_seconds"] = round(server.startup_seconds or 0, 1)
        for row, case in zip(results["cases"], cases, strict=True):
            body = {k: v for k, v in case.body.items() if k not in ("stream", "stream_options")}
            status, payload = server.render(case.route, body)
            ids = token_ids(case.route, payload)
            row["render_033"] = len(ids) if ids is not None else f"{status}"
            print(f"render  {case.name:32} {row['render_033']}", flush=True)


def table(results: dict[str, Any]) -> str:
    head = (
        "| case | route | stream | vLLM direct | via sidecar | predicted (header) "
        "| log predicted | log observed | render 0.33 | diff |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for row in results["cases"]:
        actual = row["direct"]
        predicted = row["predicted_header"]
        diff = "" if actual is None or predicted is None else f"{predicted - actual:+d}"
        route = re.sub(r"^/v1/", "", row["route"])
        lines.append(
            f"| {row['case']} | {route} | {'yes' if row['stream'] else ''} | {actual} "
            f"| {row['via_sidecar']} | {predicted} | {row['log_predicted']} "
            f"| {row['log_observed']} | {row.get('render_033', '')} "
            f"| {diff}{' ' + row['error'] if row['error'] else ''} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    name = next((a for a in argv if not a.startswith("--")), "tiny-qwen2.5-vl")
    results = run(name, render="--render" in argv)
    out = LOG_DIR / f"smoke-{name}.json"
    out.write_text(json.dumps(results, indent=2))
    print(table(results))
    keys = (
        "vllm_ready_seconds",
        "vllm_rss_gib",
        "sidecar_ready_seconds",
        "sidecar_kv_budget",
        "render_ready_seconds",
    )
    for key in keys:
        print(f"{key}: {results.get(key)}")
    print("cache_config_info:", *results["cache_config_info"], sep="\n  ")
    print(f"json: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
