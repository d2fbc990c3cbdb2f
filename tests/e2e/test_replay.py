"""Replay proves itself against the live sidecar: one traffic mix is recorded with
``SIDECAR_TRAFFIC_LOG`` under permissive settings A, then for each setting B the log is
replayed with ``vlm-sidecar replay --set B`` and the same traffic is sent to a live sidecar
under B. Decision counts must be equal, and so must each request's decision, status and
predicted figures (matched by ``x-request-id``).

The schedule is timed so the KV-budget cases are deterministic: two 1920x1080 requests and
one 640x480 fill the budget exactly; every grant, timeout and queue-full lands 0.2 s or more
away from the event that could change it (the stand-in holds each request with ``delay=S``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client import CollectorRegistry

from sidecar.advisor.candidates import candidate_settings
from sidecar.advisor.records import read_traffic_log
from sidecar.advisor.replay import Outcome, replay
from sidecar.advisor.repricing import Candidate
from sidecar.serve.server import RunningSidecar, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, StandinServer, run_standin
from tests.support.cli import run_cli
from tests.support.imaging import chat_with_images, data_uri, image_bytes, jpeg_uri
from tests.support.proxy_helpers import DECISION, expected, post
from tests.support.sidecars import MODEL_ALIAS, QWEN, SidecarFactory

pytestmark = pytest.mark.slow

HD, SMALL, ICON, PHOTO = (1920, 1080), (640, 480), (64, 64), (4032, 3024)
REMOTE = "https://images.example/cat.jpg"
MAX_TOKENS = 8
# Two HD requests and one small one fill the in-flight budget exactly.
KV_BUDGET = 2 * expected([HD], output_tokens=MAX_TOKENS)[2] + expected([SMALL], output_tokens=8)[2]


@dataclass(frozen=True)
class Step:
    """One request of the mix: when it is sent, what it carries, how long vLLM holds it."""

    name: str
    at: float
    images: tuple[Any, ...]
    held: float = 0.05
    max_tokens: int | None = MAX_TOKENS
    headers: tuple[tuple[str, str], ...] = ()  # objective and fairness headers

    def body(self) -> bytes:
        uris = [
            image
            if isinstance(image, str)
            else data_uri(image_bytes(*image[:2], "PNG"), "image/png")
            if len(image) == 3
            else jpeg_uri(*image)
            for image in self.images
        ]
        fields: dict[str, Any] = {"model": QWEN}  # the served name, as vLLM requires
        if self.max_tokens is not None:
            fields["max_tokens"] = self.max_tokens
        return orjson.dumps(chat_with_images(*uris, **fields))


MIX = (
    # Queue and grant: a2 and a3 wait for a0's release (a3 would fit, but FIFO holds it).
    Step("a0", 0.00, (HD,), held=0.6),
    Step("a1", 0.05, (HD,), held=0.6),
    Step("a2", 0.20, (HD,), held=0.2),
    Step("a3", 0.25, (SMALL,), held=0.1),
    # Timeouts: b2 waits past 1 s; b3 is granted when b2 leaves; b4 times out too.
    Step("b0", 1.50, (HD,), held=2.5),
    Step("b1", 1.55, (HD,), held=2.5),
    Step("b2", 1.70, (HD,)),
    Step("b3", 2.10, (SMALL,), held=0.2),
    Step("b4", 2.80, (HD,)),
    # Per-request budgets: a 12 MP photo, two images, a URL, a PNG with the default output.
    Step("c0", 4.30, (PHOTO,)),
    Step("c1", 4.35, (SMALL, ICON)),
    Step("c2", 4.40, (REMOTE,)),
    Step("c3", 4.45, ((1280, 720, "png"),), max_tokens=None),
)

# Setting B: the variables (as --set takes them) and, for the KV cases, whether timing counts.
SETTINGS_B: dict[str, tuple[dict[str, Any], bool]] = {
    "max-pixels-cap": ({"max_pixels": 1_003_520}, False),
    "image-tokens-downscale": (
        {"max_image_tokens": 1024, "over_budget_action": "downscale"},
        False,
    ),
    "request-visual-reject": ({"max_request_visual_tokens": 4096}, False),
    "kv-budget-queue": ({"kv_budget_bytes": KV_BUDGET, "queue_timeout_seconds": 1}, True),
    "kv-budget-queue-depth-1": (
        {"kv_budget_bytes": KV_BUDGET, "queue_timeout_seconds": 1, "max_queue_depth": 1},
        True,
    ),
}
# What the KV cases do to the mix: a0, a1, b0, b1, c1 and c3 are admitted at once.
QUEUED = {
    "kv-budget-queue": {
        "a2": "wait",
        "a3": "wait",
        "b2": "reject",
        "b3": "wait",
        "b4": "reject",
        "c0": "reject",
        "c2": "reject",
    },
    "kv-budget-queue-depth-1": {
        "a2": "wait",
        "a3": "reject",
        "b2": "reject",
        "b3": "reject",
        "b4": "reject",
        "c0": "reject",
        "c2": "reject",
    },
}
STATUS = {"admit": 200, "downscale": 200, "wait": 200}
REJECT_STATUS = {
    "queue_timeout": 429,
    "queue_full": 429,
    "shed": 429,
    "larger_than_kv_budget": 413,
}


@dataclass(frozen=True)
class Seen:
    status: int
    headers: dict[str, str]


async def send_mix(
    sidecar: RunningSidecar, *, timed: bool, mix: tuple[Step, ...] = MIX
) -> dict[str, Seen]:
    """The mix on its schedule (``timed``), or all at once without holding."""
    async with aiohttp.ClientSession() as session:
        start = time.monotonic()

        async def send(step: Step) -> tuple[str, Seen]:
            headers = {"x-request-id": step.name, **dict(step.headers)}
            if timed:
                await asyncio.sleep(max(0.0, start + step.at - time.monotonic()))
                headers["x-standin-fault"] = f"delay={step.held}"
            reply = await post(session, sidecar, step.body(), headers=headers)
            return step.name, Seen(reply.status, dict(reply.headers))

        return dict(await asyncio.gather(*(send(step) for step in mix)))


def record_mix(tmp_path_factory: pytest.TempPathFactory, mix: tuple[Step, ...]) -> Path:
    """``mix`` on its schedule through a sidecar with no budgets (setting A), logged."""
    log = tmp_path_factory.mktemp("traffic") / "traffic.jsonl"

    async def record() -> None:
        async with run_standin(
            StandinConfig(served_model_name=QWEN, model_aliases=(MODEL_ALIAS,))
        ) as standin:
            settings = Settings(
                model=QWEN,
                upstream_url=standin.url,  # type: ignore[arg-type]
                listen_host="127.0.0.1",
                port=0,
                metrics_port=0,
                traffic_log=str(log),
            )
            async with running_sidecar(settings, registry=CollectorRegistry()) as sidecar:
                seen = await send_mix(sidecar, timed=True, mix=mix)
        assert {s.headers[DECISION] for s in seen.values()} == {"admit"}

    asyncio.run(record())
    return log


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mix on its schedule through a sidecar with no budgets (setting A), logged."""
    return record_mix(tmp_path_factory, MIX)


def replayed(log: Path, changes: dict[str, Any]) -> dict[str, Outcome]:
    contents = read_traffic_log(log)
    settings = candidate_settings(contents.settings, changes, model=None)
    result = replay(contents.records, Candidate(settings))
    return {r.request_id: o for r, o in zip(contents.records, result.outcomes, strict=True)}


def test_the_log_holds_every_request_and_the_settings_header(recorded: Path) -> None:
    lines = [orjson.loads(line) for line in recorded.read_bytes().splitlines()]
    assert lines[0]["kind"] == "settings"
    assert lines[0]["settings"]["model"] == QWEN
    assert sorted(line["id"] for line in lines[1:]) == sorted(s.name for s in MIX)
    by_id = {line["id"]: line for line in lines[1:]}
    assert by_id["c1"]["img"] == [[640, 480, "JPEG", "data"], [64, 64, "JPEG", "data"]]
    assert by_id["c2"]["img"] == [[None, None, None, "url"]]
    assert by_id["c3"]["out"] == 1024
    assert by_id["c3"]["out_req"] is None
    assert by_id["b0"]["held"] == pytest.approx(2.5, abs=0.15)
    assert b"What is in the image" not in recorded.read_bytes()  # no content


def test_replay_under_the_recorded_settings_reproduces_them(recorded: Path) -> None:
    status, output = run_cli("replay", "--log", str(recorded), "--json")
    assert status == 0
    summary = orjson.loads(output)
    assert summary["requests"] == len(MIX)
    assert summary["decisions"] == {"admit": len(MIX), "downscale": 0, "wait": 0, "reject": 0}
    assert summary["before"]["kv_bytes"] == summary["kv_bytes_per_request"]


@pytest.mark.parametrize("name", list(SETTINGS_B))
async def test_replay_equals_the_live_sidecar(
    recorded: Path, make_sidecar: SidecarFactory, name: str
) -> None:
    changes, timed = SETTINGS_B[name]
    sidecar = await make_sidecar(**changes)
    live = await send_mix(sidecar, timed=timed)
    assignments = [f"--set=SIDECAR_{k.upper()}={v}" for k, v in changes.items()]
    status, output = run_cli("replay", "--log", str(recorded), *assignments, "--json")
    assert status == 0
    summary = orjson.loads(output)
    live_counts = Counter(seen.headers[DECISION] for seen in live.values())
    assert summary["decisions"] == {d: live_counts.get(d, 0) for d in summary["decisions"]}
    outcomes = replayed(recorded, changes)
    for step in MIX:
        outcome, seen = outcomes[step.name], live[step.name]
        assert outcome.decision.value == seen.headers[DECISION], (step.name, seen.status)
        reason = str(outcome.reason)
        assert seen.status == STATUS.get(outcome.decision.value, REJECT_STATUS.get(reason, 400))
        assert outcome.priced is not None
        priced = outcome.priced
        figures = (priced.visual_tokens, priced.prompt_tokens, priced.kv_bytes)
        headers = ("visual-tokens", "prompt-tokens", "kv-bytes")
        assert figures == tuple(int(seen.headers[f"x-vlm-sidecar-{h}"]) for h in headers), step.name
    if timed:  # the schedule does what it was built to do
        queued = {s: o.decision.value for s, o in outcomes.items() if o.decision.value != "admit"}
        assert queued == QUEUED[name]
    else:
        assert summary["queue"]["waited"] == 0


# Two tenants in band 0, a chat band above it, a sheddable batch request. The budget holds
# two HD requests (and a small one); d0 and d1 fill it.
SCANS, PERSON = (("x-gateway-inference-fairness-id", "scans"),), "x-llm-d-inference-fairness-id"
BANDS_MIX = (
    Step("d0", 0.00, (HD,), held=0.8, headers=SCANS),
    Step("d1", 0.05, (HD,), held=0.8, headers=SCANS),
    Step("d2", 0.10, (HD,), held=0.2, headers=SCANS),
    Step("d3", 0.15, (HD,), held=0.2, headers=SCANS),
    # Another tenant: its start tag is the band's virtual time, level with d2's, before d3's.
    Step("d4", 0.20, (HD,), held=0.2, headers=((PERSON, "ana"),)),
    # Band 10 goes first; batch is sheddable: a 429 at once.
    Step("d5", 0.25, (HD,), held=0.2, headers=(("x-gateway-inference-objective", "chat"),)),
    Step("d6", 0.30, (HD,), headers=(("x-gateway-inference-objective", "batch"),)),
)
BANDS = {"kv_budget_bytes": KV_BUDGET, "queue_timeout_seconds": 2}
BANDS_B: dict[str, tuple[dict[str, Any], dict[str, str], list[str]]] = {
    # (settings B, decisions of d2..d6, the order the waiters reach vLLM)
    "bands-and-tenants": (
        {**BANDS, "objective_priorities": "chat=10,batch=-1"},
        {"d2": "wait", "d3": "wait", "d4": "wait", "d5": "wait", "d6": "reject"},
        ["d5", "d2", "d4", "d3"],
    ),
    "fifo": (
        {**BANDS, "fairness": False},
        {"d2": "wait", "d3": "wait", "d4": "wait", "d5": "wait", "d6": "wait"},
        ["d2", "d3", "d4", "d5", "d6"],
    ),
}


@pytest.fixture(scope="module")
def recorded_bands(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_mix(tmp_path_factory, BANDS_MIX)


def test_the_log_holds_the_queue_tags_with_the_tenant_hashed(recorded_bands: Path) -> None:
    lines = [orjson.loads(line) for line in recorded_bands.read_bytes().splitlines()[1:]]
    by_id = {line["id"]: line for line in lines}
    assert by_id["d5"]["obj"] == "chat"
    assert "tenant" not in by_id["d5"]
    assert by_id["d0"]["tenant"] == by_id["d3"]["tenant"] != by_id["d4"]["tenant"]
    assert b"scans" not in recorded_bands.read_bytes()


@pytest.mark.parametrize("name", list(BANDS_B))
async def test_replay_with_bands_and_tenants_equals_the_live_sidecar(
    recorded_bands: Path, make_sidecar: SidecarFactory, standin: StandinServer, name: str
) -> None:
    changes, decisions, order = BANDS_B[name]
    sidecar = await make_sidecar(**changes)
    live = await send_mix(sidecar, timed=True, mix=BANDS_MIX)
    outcomes = replayed(recorded_bands, changes)
    for step in BANDS_MIX:
        outcome, seen = outcomes[step.name], live[step.name]
        assert outcome.decision.value == seen.headers[DECISION], (step.name, seen.status)
        wanted = decisions.get(step.name, "admit")
        assert outcome.decision.value == wanted, step.name
        status = STATUS.get(wanted) or REJECT_STATUS.get(str(outcome.reason), 400)
        assert seen.status == status, step.name
    assert str(outcomes["d6"].reason) == (
        "shed" if name == "bands-and-tenants" else "kv_budget_full"
    )
    arrivals = {r.request_id: r.arrival for r in read_traffic_log(recorded_bands).records}
    granted = sorted(order, key=lambda step: arrivals[step] + outcomes[step].wait_seconds)
    assert granted == order  # the replay grants in the live order
    reached = [r.headers["x-request-id"] for r in standin.requests]
    assert [step for step in reached if step in order] == order
    assignments = [f"--set=SIDECAR_{k.upper()}={v}" for k, v in changes.items()]
    status, output = run_cli("replay", "--log", str(recorded_bands), *assignments, "--json")
    assert status == 0
    summary = orjson.loads(output)
    live_counts = Counter(seen.headers[DECISION] for seen in live.values())
    assert summary["decisions"] == {d: live_counts.get(d, 0) for d in summary["decisions"]}
    if name == "bands-and-tenants":
        assert summary["bands"]["10"]["waited"] == 1
        assert summary["bands"]["-1"]["status_429"] == 1
        assert summary["queue"]["shed"] == 1
