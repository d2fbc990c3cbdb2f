"""observe.labels: the closed label sets and the histogram buckets."""

from __future__ import annotations

import itertools

import pytest

from sidecar.observe.labels import (
    IMAGE_FORMATS,
    KV_BYTES_BUCKETS,
    PIXEL_BUCKETS,
    TOKEN_BUCKETS,
    image_format_label,
)


@pytest.mark.parametrize(
    ("buckets", "first", "last", "ratio"),
    [
        (TOKEN_BUCKETS, 16, 131_072, 2),
        (KV_BYTES_BUCKETS, 2**20, 256 * 2**30, 2),
        (PIXEL_BUCKETS, 10_000, 50_000_000, None),
    ],
    ids=["tokens-16-to-128k", "kv-1mib-to-256gib", "pixels-0.01-to-50mp"],
)
def test_metrics_buckets_span_the_documented_range(
    buckets: tuple[float, ...], first: float, last: float, ratio: float | None
) -> None:
    assert buckets[0] == first
    assert buckets[-1] == last
    assert list(buckets) == sorted(set(buckets))
    if ratio is not None:
        assert all(b / a == ratio for a, b in itertools.pairwise(buckets))


@pytest.mark.parametrize(
    ("pillow_format", "label"),
    [("JPEG", "jpeg"), ("MPO", "jpeg"), ("PNG", "png"), ("ICNS", "other"), (None, "unknown")],
    ids=["jpeg", "mpo-is-jpeg", "png", "unlisted-is-other", "none-is-unknown"],
)
def test_metrics_image_format_label_is_one_of_a_closed_set(
    pillow_format: str | None, label: str
) -> None:
    assert image_format_label(pillow_format) == label
    assert label in IMAGE_FORMATS
