"""observe.traffic: each line re-prices to exactly what the pricer said, for every body shape;
the file rotates with its settings header on every generation; a lagging writer drops lines."""

from __future__ import annotations

import hashlib
import logging
import logging.handlers
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from sidecar.admission.decision import Admit
from sidecar.admission.discipline import QueueTags
from sidecar.advisor.records import parse_record, read_traffic_log
from sidecar.advisor.repricing import Candidate
from sidecar.body.request_body import parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.observe import traffic_format
from sidecar.observe.record import RequestRecord
from sidecar.observe.traffic import TrafficLog, settings_header, tenant_hasher, traffic_entry
from sidecar.observe.usage import Usage
from sidecar.profiles import load_profile
from sidecar.routes import Route
from sidecar.settings import Settings
from tests.support.imaging import jpeg_uri
from tests.support.sidecars import QWEN

HD, SMALL = jpeg_uri(1920, 1080), jpeg_uri(640, 480)
SETTINGS = Settings(model=QWEN, audio_tokens_per_item=700, embeds_tokens_per_item=300)


def part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def user(*parts: Any, text: str = "describe") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}, *parts]}


AUDIO = {"type": "audio_url", "audio_url": {"url": "https://example.com/a.wav"}}
EMBEDS = {"type": "image_embeds", "image_embeds": "AAAA"}
BODIES: dict[str, tuple[Route, dict[str, Any]]] = {
    "chat": (Route.CHAT, {"messages": [user(part(HD), part("https://x.org/a.png"))], "n": 2}),
    "chat-default-output": (Route.CHAT, {"messages": [user(part(SMALL), AUDIO)]}),
    "chat-batch-media": (
        Route.CHAT_BATCH,
        {"messages": [[user(part(SMALL), EMBEDS)], [user(AUDIO, text="longer " * 40)]]},
    ),
    "chat-batch": (
        Route.CHAT_BATCH,
        {
            "messages": [[user(part(HD))], [user(text="a much longer question " * 20)]],
            "max_tokens": 9,
        },
    ),
    "completions-list": (Route.COMPLETIONS, {"prompt": ["one two", [1, 2, 3], "x" * 300]}),
    "generate": (
        Route.GENERATE,
        {
            "token_ids": list(range(50)),
            "sampling_params": {"max_tokens": 8},
            "content_parts": [{"type": "image_url", "url": "https://example.com/x.png"}],
        },
    ),
    "count-tokens": (Route.MESSAGES_COUNT_TOKENS, {"model": "m", "messages": [user()]}),
    "embeddings": (Route.EMBEDDINGS, {"messages": [user(part(SMALL))]}),
}


async def priced_record(route: Route, fields: dict[str, Any]) -> RequestRecord:
    body = orjson.dumps(fields)
    parsed = parse_request_body(body, route)
    pricer = Pricer(load_profile(QWEN), PricingPolicy.from_settings(SETTINGS), None)
    record = RequestRecord("r1", route)
    record.parsed = parsed
    record.apply(Admit(await pricer.price(parsed, body)))
    return record


@pytest.mark.parametrize("name", list(BODIES))
async def test_a_traffic_line_reprices_to_the_pricers_figures(name: str) -> None:
    record = await priced_record(*BODIES[name])
    policy = PricingPolicy.from_settings(SETTINGS)
    line = orjson.loads(orjson.dumps(traffic_entry(record, QWEN, policy)))
    assert "describe" not in orjson.dumps(line).decode()
    cost = parse_record(line).cost
    assert cost is not None
    candidate = Candidate(SETTINGS)
    again = candidate.predict(cost, candidate.profile.vision)
    was = record.prediction
    assert was is not None
    assert (again.visual_tokens, again.prompt_tokens, again.kv_bytes, again.text_tokens) == (
        was.visual_tokens,
        was.prompt_tokens,
        was.kv_bytes,
        was.text_tokens,
    )
    assert again.longest_prompt_tokens == was.longest_prompt_tokens
    assert (line["visual"], line["prompt"], line["kv"]) == (
        was.visual_tokens,
        was.prompt_tokens,
        was.kv_bytes,
    )


@pytest.mark.parametrize(
    ("setting", "salt", "expected"),
    [("as_sent", "", "acme"), ("hash", "pepper", "unused")],
    ids=["as-sent", "salted-hash"],
)
async def test_a_traffic_line_records_the_queue_tags_and_the_tenant_as_chosen(
    setting: str, salt: str, expected: str
) -> None:
    record = await priced_record(*BODIES["chat"])
    record.queue_tags = QueueTags("batch", 3, "acme")
    settings = Settings(model=QWEN, traffic_log_tenant=setting, traffic_log_tenant_salt=salt)
    line = traffic_entry(record, QWEN, PricingPolicy(), tenant_hasher(settings))
    assert (line["obj"], line["prio"]) == ("batch", 3)
    if setting == "as_sent":
        assert line["tenant"] == expected
    else:
        assert line["tenant"] == hashlib.sha256(b"pepperacme").hexdigest()[:16]
    again = parse_record(orjson.loads(orjson.dumps(line)))
    assert (again.objective, again.body_priority, again.tenant) == ("batch", 3, line["tenant"])


def test_the_tenant_hash_is_stable_with_a_salt_and_random_without_one() -> None:
    salted = Settings(model=QWEN, traffic_log_tenant_salt="s")
    assert tenant_hasher(salted)("acme") == tenant_hasher(salted)("acme") != "acme"
    assert tenant_hasher(SETTINGS)("acme") != tenant_hasher(SETTINGS)("acme")
    assert "traffic_log_tenant_salt" not in settings_header(salted)["settings"]


def test_a_request_refused_before_pricing_keeps_only_its_timing_and_answer() -> None:
    record = RequestRecord("r2", Route.CHAT)
    record.finished_at = record.arrived_at + 0.25
    line = traffic_entry(record, QWEN, PricingPolicy())
    assert set(line) == {"id", "t", "route", "model", "decision", "reason", "wait", "dur", "held"}
    assert (line["decision"], line["reason"], line["held"], line["dur"]) == (
        "reject",
        "invalid_body",
        None,
        0.25,
    )


async def test_the_log_rotates_and_each_file_starts_with_the_settings(tmp_path: Path) -> None:
    path = tmp_path / "traffic.jsonl"
    traffic = TrafficLog(
        Settings(model=QWEN, traffic_log=str(path), traffic_log_max_bytes=4000), QWEN
    )
    record = await priced_record(*BODIES["chat"])
    traffic.start()
    for _ in range(30):
        traffic.write(record)
    traffic.stop()
    backup = tmp_path / "traffic.jsonl.1"
    assert backup.is_file()
    for file in (backup, path):
        first = orjson.loads(file.read_bytes().splitlines()[0])
        assert first["kind"] == "settings"
        assert "traffic_log" not in first["settings"]
        assert file.stat().st_size <= 4000
    contents = read_traffic_log(path)
    assert contents.headers == 2
    assert contents.settings is not None
    assert 0 < len(contents.records) < 30  # older generations are gone: the file is bounded


async def test_a_lagging_writer_drops_lines_instead_of_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sidecar.observe.traffic.QUEUE_LINES", 3)
    path = tmp_path / "traffic.jsonl"
    traffic = TrafficLog(Settings(model=QWEN, traffic_log=str(path)), QWEN)
    record = await priced_record(*BODIES["chat"])
    disk_free = threading.Event()
    write_to_disk = logging.handlers.RotatingFileHandler.emit

    def slow_disk(handler: logging.handlers.RotatingFileHandler, line: logging.LogRecord) -> None:
        disk_free.wait(timeout=10)
        write_to_disk(handler, line)

    traffic.start()  # the settings header is written before the disk slows down
    monkeypatch.setattr(logging.handlers.RotatingFileHandler, "emit", slow_disk)
    try:
        for _ in range(20):
            traffic.write(record)
        assert traffic.dropped >= 16  # 3 queued, at most 1 taken by the blocked writer
    finally:
        disk_free.set()
    traffic.stop()
    assert len(read_traffic_log(path).records) == 20 - traffic.dropped


def test_without_a_path_the_log_does_nothing(tmp_path: Path) -> None:
    traffic = TrafficLog(Settings(model=QWEN), QWEN)
    traffic.start()
    traffic.write(RequestRecord("r3", Route.CHAT))
    traffic.stop()
    assert traffic.dropped == 0
    assert not list(tmp_path.iterdir())
    assert logging.getLogger("vlm_sidecar.traffic").handlers == []


async def test_a_line_records_vllms_count_and_the_image_tokens_error() -> None:
    record = await priced_record(*BODIES["chat-default-output"])
    predicted_images = record.prediction.image_tokens if record.prediction else 0
    record.usage = Usage(prompt_tokens=900, completion_tokens=5, image_tokens=predicted_images + 7)
    entry = traffic_entry(record, QWEN, PricingPolicy.from_settings(SETTINGS))
    assert (entry["obs"], entry["img_err"]) == (900, 7)
    record.usage = Usage(prompt_tokens=900, completion_tokens=5, image_tokens=None)
    entry = traffic_entry(record, QWEN, PricingPolicy.from_settings(SETTINGS))
    assert entry["obs"] == 900
    assert "img_err" not in entry  # vLLM ran without --enable-prompt-tokens-details


@pytest.mark.parametrize("name", list(BODIES))
async def test_a_traffic_line_holds_the_formats_fields_in_the_formats_order(name: str) -> None:
    # The reader shares a cost between lines by the text from the first cost field on, so
    # the writer must put every field where ``traffic_format`` says.
    record = await priced_record(*BODIES[name])
    record.queue_tags = QueueTags(objective="batch", body_priority=2, tenant="acme")
    record.usage = Usage(prompt_tokens=10, completion_tokens=1, image_tokens=5)
    line = traffic_entry(record, QWEN, PricingPolicy.from_settings(SETTINGS))
    assert list(line) == [field for field in traffic_format.LINE_ORDER if field in line]
    assert {*traffic_format.OWN_FIELDS, *traffic_format.COST_FIELDS} <= set(line)
