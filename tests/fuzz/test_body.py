"""Fuzzing the body parser and the image reference extraction (``request_body``, ``body.refs``).

Bodies come from each route's grammar, mangled or not (``tests.support.fuzz_strategies``).
Properties:

* the parser returns a ``RequestBody`` or raises ``InvalidRequestError`` (a 400), nothing else;
* what it returns is sane: spans inside the body, counts in range, images numbered in order;
* splicing a new image over every inline one (what downscaling does) leaves valid JSON;
* the fast path (strings lifted out before parsing) reads a valid body exactly as a plain full
  parse does, and JSON-escaped slashes change nothing.

``make test`` runs a sample; ``make fuzz`` runs ``FUZZ_EXAMPLES`` cases per test.
"""

from __future__ import annotations

import contextlib
import re
from types import MappingProxyType
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.body import request_body
from sidecar.body.refs import MediaSource
from sidecar.body.request_body import (
    MAX_INT64,
    BodyPolicy,
    RequestBody,
    parse_request_body,
    splice,
)
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route
from tests.support.fuzz_strategies import examples, request_bytes

ROUTES = list(Route)
ROUTE_IDS = [route.name.lower() for route in Route]
NEW_IMAGE = b"data:image/png;base64,iVBORw0KGgo="
UNESCAPED_SLASH = re.compile(rb"(?<!\\)((?:\\\\)*)/")  # a "/" not already escaped as "\/"


def parsed_or_none(raw: bytes, route: Route, **caps: int) -> RequestBody | None:
    """The parse, or None for a 400; any other exception fails the test."""
    try:
        return parse_request_body(raw, route, policy=BodyPolicy(**caps))
    except InvalidRequestError:
        return None


def summary(parsed: RequestBody, raw: bytes) -> tuple[Any, ...]:
    """Everything pricing reads from a parse, with payloads as bytes."""
    images = [
        (
            ref.index,
            ref.source,
            ref.url,
            ref.media_type,
            ref.uuid,
            ref.bare_base64,
            bytes(ref.payload(raw)) if ref.source is MediaSource.DATA else None,
        )
        for ref in parsed.images
    ]
    media = [(item.kind, item.index, item.source, item.url, item.uuid) for item in parsed.media]
    return (
        images,
        media,
        parsed.model,
        parsed.text_chars,
        parsed.prompt_token_ids,
        len(parsed.sequences),
        parsed.max_output_tokens,
        parsed.n,
        parsed.stream,
        parsed.include_usage,
    )


def is_json(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@examples(60)
@given(data=st.data())
def test_parse_request_body_answers_any_body_with_a_reading_or_a_400(
    route: Route, data: st.DataObject
) -> None:
    raw = data.draw(request_bytes(route))
    parsed = parsed_or_none(raw, route)
    parsed_or_none(raw, route, max_parts=4, max_depth=6)  # the caps fail as cleanly
    if parsed is None:
        return
    assert isinstance(parsed.skeleton, MappingProxyType)
    assert min(parsed.n, len(parsed.sequences)) >= 1
    assert min(parsed.text_chars, parsed.prompt_token_ids) >= 0
    assert parsed.max_output_tokens is None or 1 <= parsed.max_output_tokens <= MAX_INT64
    assert [ref.index for ref in parsed.images] == list(range(len(parsed.images)))
    assert [item.index for item in parsed.media] == list(range(len(parsed.media)))
    for ref in parsed.images:
        if ref.uri_span is not None:
            start, end = ref.uri_span
            assert 0 <= start <= end <= len(raw)
            if ref.payload_span is not None:
                assert start <= ref.payload_span[0] <= ref.payload_span[1] <= end


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@examples(30)
@given(data=st.data())
def test_splicing_a_new_image_over_every_inline_one_leaves_valid_json(
    route: Route, data: st.DataObject
) -> None:
    raw = data.draw(request_bytes(route))
    parsed = parsed_or_none(raw, route)
    if parsed is None or not is_json(raw):
        return
    refs = [ref for ref in parsed.images if ref.uri_span is not None]
    spliced = splice(raw, [ref.replacement("image/png", NEW_IMAGE[22:]) for ref in refs])
    document = orjson.loads(spliced)  # raises if the splice broke the JSON
    again = parse_request_body(spliced, route)
    assert len(again.images) == len(parsed.images)
    assert [ref.source for ref in again.images] == [ref.source for ref in parsed.images]
    new_payloads = [bytes(ref.payload(spliced)) for ref in again.images if ref.uri_span]
    assert new_payloads == [NEW_IMAGE[22:]] * len(refs)
    assert isinstance(document, dict)


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@examples(30)
@given(data=st.data())
def test_the_fast_path_reads_a_valid_body_exactly_as_a_plain_full_parse(
    route: Route, data: st.DataObject
) -> None:
    raw = data.draw(request_bytes(route))
    if not is_json(raw):
        return
    fast = parsed_or_none(raw, route)
    with mock.patch.object(request_body, "lift_strings", lambda body, limit: (body, {})):
        plain = parsed_or_none(raw, route)
    assert (fast is None) == (plain is None)
    if fast is not None and plain is not None:
        assert summary(fast, raw) == summary(plain, raw)


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@examples(30)
@given(data=st.data())
def test_json_escaped_slashes_change_nothing_the_parser_reads(
    route: Route, data: st.DataObject
) -> None:
    raw = data.draw(request_bytes(route))
    if not is_json(raw):
        return
    escaped = UNESCAPED_SLASH.sub(rb"\1\\/", raw)
    plain, slashed = parsed_or_none(raw, route), parsed_or_none(escaped, route)
    assert (plain is None) == (slashed is None)
    if plain is not None and slashed is not None:
        assert summary(plain, raw) == summary(slashed, escaped)


@examples(100)
@given(raw=st.binary(max_size=400), route=st.sampled_from(ROUTES))
def test_parse_request_body_answers_random_bytes_with_a_400(raw: bytes, route: Route) -> None:
    with contextlib.suppress(InvalidRequestError):
        parse_request_body(raw, route)
