"""advisor.records: the reader shares the costs of equal tails, and reads every line as a
plain per-line parse would."""

from __future__ import annotations

import random
from dataclasses import astuple
from pathlib import Path
from typing import Any

import orjson

from sidecar.advisor.records import TrafficRecord, parse_lines, parse_record, read_traffic_log
from tests.support.sidecars import QWEN
from tests.support.traffic_lines import COST_FIELDS, OWN_FIELDS, record_line


def line(
    own: dict[str, Any] | None = None,
    cost: dict[str, Any] | None = None,
    then: bytes = b"",
    before: bytes = b"",
) -> bytes:
    """A record line; ``then``: more fields written after the cost (a key written twice);
    ``before``: more fields written between the request's own and the cost."""
    written = orjson.dumps(record_line(own, cost))
    at = written.index(b'"img":')
    return written[:at] + before + written[at:-1] + then + b"}"


def plainly(lines: list[bytes]) -> list[TrafficRecord]:
    """The reference: every line parsed whole, on its own, then ordered by arrival."""
    records = []
    for raw in lines:
        try:
            parsed = orjson.loads(raw)
            if parsed.get("kind") != "settings":
                records.append(parse_record(parsed))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            continue
    return sorted(records, key=lambda record: record.arrival)


def rows(records: Any) -> list[tuple[Any, ...]]:
    """Records as plain values: ``astuple`` turns the cost into its fields too, so costs are
    compared by value, not by identity."""
    return [astuple(record) for record in records]


def test_lines_with_equal_tails_share_one_cost_object() -> None:
    lines = [line({"id": f"r{n}", "t": 10.0 - n}) for n in range(3)]
    records = parse_lines(lines).records
    assert [r.request_id for r in records] == ["r2", "r1", "r0"]  # by arrival
    assert records[0].cost is records[1].cost is records[2].cost
    assert rows(records) == rows(plainly(lines))


def test_a_tail_holding_an_own_field_lends_nothing() -> None:
    # A parser keeps the last of a key written twice: "t" here is the tail's, on every line
    # that ends this way, so the second line's head must not stand for its arrival.
    lines = [
        line({"id": "a", "t": 1.0}, then=b',"t":99.0'),
        line({"id": "b", "t": 2.0}, then=b',"t":99.0'),
    ]
    records = parse_lines(lines).records
    assert [r.arrival for r in records] == [99.0, 99.0]
    assert rows(records) == rows(plainly(lines))


def test_a_key_written_twice_with_a_space_lends_nothing() -> None:
    # JSON allows a space before the colon: the tail still holds a second "t".
    lines = [
        line({"id": "a", "t": 1.0}, then=b',"t" :99.0'),
        line({"id": "b", "t": 2.0}, then=b',"t" :99.0'),
    ]
    assert [r.arrival for r in parse_lines(lines).records] == [99.0, 99.0]
    assert rows(parse_lines(lines).records) == rows(plainly(lines))


def test_a_head_holding_a_cost_field_borrows_no_cost() -> None:
    # The second line's audio item is written before "img": its tail equals the first
    # line's, its cost does not.
    lines = [line({"id": "a"}), line({"id": "b", "t": 6.0}, before=b'"media":[["audio"]],')]
    records = parse_lines(lines).records
    assert records[0].cost is not None
    assert records[0].cost.media == ()
    assert records[1].cost is not None
    assert records[1].cost.media == (("audio", 0, 0, True),)
    assert rows(records) == rows(plainly(lines))


def test_queue_tags_are_read_with_a_shared_cost() -> None:
    lines = [
        line({"id": "a", "t": 1.0}),
        line({"id": "b", "t": 2.0}, before=b'"obj":"batch","prio":3,"tenant":"9f2c",'),
        line({"id": "c", "t": 3.0}, before=b'"tenant":"9f2c",'),
    ]
    records = parse_lines(lines).records
    assert [(r.objective, r.body_priority, r.tenant) for r in records] == [
        (None, None, ""),
        ("batch", 3, "9f2c"),
        (None, None, "9f2c"),
    ]
    assert records[0].cost is records[1].cost is records[2].cost
    assert rows(records) == rows(plainly(lines))


def test_random_logs_read_as_a_line_by_line_parse_reads_them() -> None:
    rng = random.Random(11)
    tails = [
        COST_FIELDS,
        {**COST_FIELDS, "img": []},
        {**COST_FIELDS, "text": 41, "out_req": None},
        {**COST_FIELDS, "media": [["video", 300, 2, False], ["audio"]]},
        {**COST_FIELDS, "px": [1000, 200000]},
        {**COST_FIELDS, "text": "many"},  # a cost that cannot be read
        {**COST_FIELDS, "img": [[640, [480], "jpeg", "data"]]},  # nor can this one's image
    ]
    afters = [b"", b"", b"", b',"t":7.0', b',"held":null', b',"text":3', b',"wait" : 1']
    # Fields written between the request's own and the cost: cost fields, or one of its own.
    befores = [b"", b"", b"", b'"media":[["audio"]],', b'"px":[1,2],', b'"kv":9,', b'"t":3.0,']
    # The queue tags (own fields written after the others), in order and out of it.
    befores += [b'"obj":"chat","tenant":"t1",', b'"prio":-2,', b'"tenant":"x","obj":"b",']
    for _ in range(50):
        lines = [orjson.dumps({"kind": "settings", "settings": {"model": "m"}})]
        for number in range(rng.randint(0, 40)):
            own: dict[str, Any] = {"id": f"r{number}", "t": rng.choice([1.0, 2.0, 3.5, 9.0])}
            if rng.random() < 0.1:
                own["held"] = None
            if rng.random() < 0.05:
                own["wait"] = "soon"  # a wrong type: the line is skipped
            kind = rng.random()
            if kind < 0.1:
                lines.append(orjson.dumps({**OWN_FIELDS, **own}))  # refused before pricing
            elif kind < 0.15:
                lines.append(line(own)[: rng.randint(1, 60)])  # cut short by a crash
            elif kind < 0.2:  # the cost's fields before the request's own
                lines.append(orjson.dumps({**rng.choice(tails), **OWN_FIELDS, **own}))
            else:
                lines.append(line(own, rng.choice(tails), rng.choice(afters), rng.choice(befores)))
        contents = parse_lines(lines)
        assert rows(contents.records) == rows(plainly(lines))
        assert contents.headers == 1


def test_lines_are_read_oldest_file_first_and_bad_lines_are_counted(tmp_path: Path) -> None:
    def line(request_id: str, arrival: float) -> bytes:
        return orjson.dumps(
            {
                "id": request_id,
                "t": arrival,
                "route": "chat_completions",
                "model": QWEN,
                "decision": "admit",
                "reason": "within_budget",
                "wait": 0,
                "dur": 1,
                "held": 1,
            }
        )

    header = orjson.dumps({"kind": "settings", "settings": {"model": QWEN}})
    (tmp_path / "t.jsonl.1").write_bytes(b"\n".join([header, line("old", 5.0)]) + b"\n")
    (tmp_path / "t.jsonl").write_bytes(b"\n".join([header, line("new", 9.0), b'{"cut']))
    contents = read_traffic_log(tmp_path / "t.jsonl")
    assert [r.request_id for r in contents.records] == ["old", "new"]
    assert (contents.headers, contents.skipped_lines) == (2, 1)
    assert contents.records[0].cost is None
    assert parse_lines([b"", b"[1, 2]", b"{}"]).skipped_lines == 2
