"""observe.traffic_format: the header line the reader takes for one, and field names that are
each written once, in one order (the writer's order: ``test_traffic.py``)."""

from __future__ import annotations

import orjson

from sidecar.advisor.records import parse_lines
from sidecar.observe import traffic_format
from tests.support.traffic_lines import record_line


def test_a_header_line_is_read_back_as_the_settings_and_not_as_a_record() -> None:
    header = traffic_format.header_line({"model": "m", "max_image_tokens": 9}, 1.5)
    lines = [orjson.dumps(header), orjson.dumps(record_line())]
    read = parse_lines(lines)
    assert read.settings == {"model": "m", "max_image_tokens": 9}
    assert (read.headers, len(read.records), read.skipped_lines) == (1, 1, 0)
    assert header["format"] == traffic_format.TRAFFIC_FORMAT


def test_every_field_has_one_name_and_the_cost_starts_at_its_first_field() -> None:
    order = traffic_format.LINE_ORDER
    assert len(order) == len(set(order))
    assert order.index(traffic_format.FIRST_COST_FIELD) == len(traffic_format.OWN_FIELDS) + len(
        traffic_format.TAG_FIELDS
    )
