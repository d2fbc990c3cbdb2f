"""images.byte_sources: an image's bytes read by offset however they were sent, decoding or
reading only what is asked for."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from sidecar.errors import NotBase64Error
from sidecar.images.byte_sources import Base64Source, BytesSource, FileSource

DATA = bytes(i * 7 % 256 for i in range(200_000))


def _reads(source: BytesSource | Base64Source | FileSource) -> dict[tuple[int, int], bytes]:
    """The same reads of every source: at the start, in the middle, across and past the end."""
    spans = [(0, 16), (5, 3000), (150_000, 64), (199_990, 100), (250_000, 8), (0, 0)]
    return {(offset, length): source.read(offset, length) for offset, length in spans}


EXPECTED = {
    (0, 16): DATA[:16],
    (5, 3000): DATA[5:3005],
    (150_000, 64): DATA[150_000:150_064],
    (199_990, 100): DATA[199_990:],
    (250_000, 8): b"",
    (0, 0): b"",
}


def test_bytes_source_reads_the_slices_asked_for() -> None:
    source = BytesSource(memoryview(DATA))
    assert source.size == len(DATA)
    assert _reads(source) == EXPECTED


@pytest.mark.parametrize("kind", [str, bytes, memoryview], ids=["str", "bytes", "memoryview"])
def test_base64_source_decodes_to_the_same_bytes_from_any_holder(kind: type) -> None:
    text = "data:image/png;base64," + base64.b64encode(DATA).decode()
    payload = text if kind is str else kind(text.encode())
    source = Base64Source(payload, start=text.index(",") + 1)
    assert source.size == len(DATA)
    assert _reads(source) == EXPECTED


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5], ids=lambda n: f"{n}-bytes")
def test_base64_source_gives_the_size_padding_leaves(length: int) -> None:
    source = Base64Source(base64.b64encode(DATA[:length]).decode(), start=0)
    assert source.size == length
    assert source.read(0, 10) == DATA[:length]


def test_base64_source_checks_only_what_it_decodes() -> None:
    head = base64.b64encode(DATA[:30_000]).decode()
    garbage_far_away = head + "!!!!" * 10 + base64.b64encode(DATA[:3000]).decode()
    source = Base64Source(garbage_far_away, start=0)
    assert source.read(0, 64) == DATA[:64]  # the header is all a probe reads
    with pytest.raises(NotBase64Error, match="not strict base64 \\(between characters"):
        source.read(30_010, 16)  # the bytes the "!!!!" stand for


def test_base64_source_refuses_padding_before_the_end() -> None:
    payload = base64.b64encode(b"ab").decode() + base64.b64encode(DATA[:3000]).decode()
    with pytest.raises(NotBase64Error, match="not strict base64"):
        Base64Source(payload, start=0).read(0, 3000)


def test_base64_source_refuses_a_payload_cut_inside_a_group() -> None:
    with pytest.raises(NotBase64Error):
        Base64Source("QUJ", start=0)


def test_file_source_reads_the_same_bytes_as_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "image.bin"
    path.write_bytes(DATA)
    with path.open("rb") as file:
        source = FileSource(file)
        assert source.size == len(DATA)
        assert _reads(source) == EXPECTED
