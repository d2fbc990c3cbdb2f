"""Reading a request's queue tags and classifying it into a band and a tenant."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from sidecar.admission.discipline import (
    DEFAULT_CLASS,
    PriorityPolicy,
    QueueClass,
    QueueTags,
    classify,
    read_tags,
)

MAPPING = {"chat": 10, "default": 0, "batch": -1}
POLICY = PriorityPolicy(objective_priorities=MAPPING)
TRUSTING = PriorityPolicy(objective_priorities=MAPPING, trust_request_priority=True)


@pytest.mark.parametrize(
    ("headers", "body_priority", "policy", "expected"),
    [
        ({}, None, POLICY, DEFAULT_CLASS),
        ({"x-gateway-inference-objective": "chat"}, None, POLICY, QueueClass(10)),
        ({"X-LLM-D-Inference-Objective": "batch"}, None, POLICY, QueueClass(-1, True)),
        ({"x-gateway-inference-objective": "unknown"}, None, POLICY, QueueClass(0)),
        ({"x-gateway-inference-fairness-id": "acme"}, None, POLICY, QueueClass(0, False, "acme")),
        ({"x-llm-d-inference-fairness-id": "acme"}, None, POLICY, QueueClass(0, False, "acme")),
        (
            {"x-gateway-inference-fairness-id": "acme"},
            None,
            PriorityPolicy(fairness=False),
            DEFAULT_CLASS,
        ),
        (
            {"x-gateway-inference-fairness-id": "acme", "x-team": "red"},
            None,
            PriorityPolicy(fairness_id_header="x-team"),
            QueueClass(0, False, "red"),
        ),
        ({}, 5, POLICY, DEFAULT_CLASS),
        ({}, 5, TRUSTING, QueueClass(-5, False)),
        ({}, -3, TRUSTING, QueueClass(3, False)),
        ({}, "2", TRUSTING, QueueClass(-2, False)),
        ({}, 1.5, TRUSTING, DEFAULT_CLASS),
        ({"x-gateway-inference-objective": "chat"}, 5, TRUSTING, QueueClass(10)),
    ],
    ids=[
        "no-headers-default",
        "objective-gateway-spelling",
        "objective-llm-d-spelling-sheddable",
        "objective-not-mapped-zero",
        "tenant-gateway-spelling",
        "tenant-llm-d-spelling",
        "fairness-off-one-tenant",
        "operator-named-tenant-header",
        "body-priority-untrusted-ignored",
        "body-priority-vllm-sign-later-never-shed",
        "body-priority-vllm-sign-earlier",
        "body-priority-lax-int-as-vllm-reads-it",
        "body-priority-fraction-ignored",
        "objective-wins-over-body",
    ],
)
def test_classify_reads_objective_tenant_and_trusted_priority(
    headers: dict[str, str], body_priority: object, policy: PriorityPolicy, expected: QueueClass
) -> None:
    assert classify(read_tags(CIMultiDict(headers), body_priority, policy), policy) == expected


def test_read_tags_keeps_what_the_request_says_whatever_the_rules() -> None:
    headers = CIMultiDict({"x-llm-d-inference-objective": " batch ", "x-team": "red"})
    assert read_tags(headers, 7, PriorityPolicy(fairness=False)) == QueueTags("batch", 7, "")
    named = PriorityPolicy(fairness=False, fairness_id_header="x-team")
    assert read_tags(headers, "7", named) == QueueTags("batch", 7, "red")
    assert read_tags(CIMultiDict(), None, POLICY) is read_tags(CIMultiDict(), 1.5, POLICY)


def test_band_labels_are_the_mapped_priorities_zero_and_other() -> None:
    assert POLICY.band_labels == ("10", "0", "-1", "other")
    assert [POLICY.band_label(p) for p in (10, 0, -1, 7, -20)] == ["10", "0", "-1"] + ["other"] * 2
    assert PriorityPolicy().band_labels == ("0", "other")
