"""images.headers.contract: ``need`` reads all the bytes a header needs, or says truncated."""

from __future__ import annotations

import pytest

from sidecar.errors import TruncatedImageError
from sidecar.images.headers.contract import need
from tests.support.headers import CountingSource


def test_need_returns_exactly_the_bytes_asked_for() -> None:
    assert need(CountingSource(b"0123456789"), 2, 5, "PNG") == b"23456"
    assert need(CountingSource(b"0123456789"), 0, 10, "PNG") == b"0123456789"


def test_need_raises_truncated_naming_the_format_and_reads_nothing() -> None:
    source = CountingSource(b"0123456789")
    with pytest.raises(TruncatedImageError, match=r"the GIF image is truncated.*10 bytes sent"):
        need(source, 8, 3, "GIF")
    assert source.reads == []
