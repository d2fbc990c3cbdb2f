"""Classifying requests into bands and tenants, and the fair queue's order."""

from __future__ import annotations

import tracemalloc

import pytest
from multidict import CIMultiDict

from sidecar.admission.discipline import (
    DEFAULT_CLASS,
    FairQueue,
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
        ({}, True, TRUSTING, DEFAULT_CLASS),
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
        "body-priority-bool-ignored",
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
    assert read_tags(headers, "7", named) == QueueTags("batch", None, "red")
    assert read_tags(CIMultiDict(), None, POLICY) is read_tags(CIMultiDict(), 1.5, POLICY)


def drain(queue: FairQueue[str], now: float = 0.0) -> list[str]:
    """Grant every waiter in the queue's order."""
    order = []
    while (head := queue.head(now)) is not None:
        queue.grant(head)
        order.append(head.item)
    return order


def test_fair_queue_one_tenant_is_fifo_whatever_the_costs() -> None:
    queue: FairQueue[str] = FairQueue()
    for number, kv_bytes in enumerate([900, 1, 50, 0, 7]):
        queue.push(f"r{number}", kv_bytes, 0, "", 0.0)
    assert drain(queue) == ["r0", "r1", "r2", "r3", "r4"]


def test_fair_queue_interleaves_tenants_by_kv_bytes_not_by_requests() -> None:
    queue: FairQueue[str] = FairQueue()
    for number in range(4):
        queue.push(f"heavy{number}", 800, 0, "heavy", 0.0)
    for number in range(8):
        queue.push(f"light{number}", 100, 0, "light", 0.0)
    # Start tags: heavy 0, 800, 1600, 2400; light 0, 100, ..., 700: light's 8 requests cost
    # one heavy request, so they all go before heavy's second.
    assert drain(queue) == [
        "heavy0",
        *(f"light{n}" for n in range(8)),
        "heavy1",
        "heavy2",
        "heavy3",
    ]


def test_fair_queue_a_newcomer_goes_ahead_of_a_backlog() -> None:
    queue: FairQueue[str] = FairQueue()
    for number in range(10):
        queue.push(f"heavy{number}", 1000, 0, "heavy", 0.0)
    queue.grant(queue.head(0.0))  # type: ignore[arg-type]
    queue.push("light", 1, 0, "light", 1.0)
    assert drain(queue)[:2] == ["light", "heavy1"]


def test_fair_queue_serves_bands_strictly_in_order() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("low-a", 1, -5, "", 0.0)
    queue.push("mid", 1, 0, "x", 0.0)
    queue.push("high", 1_000_000, 10, "", 0.0)
    queue.push("low-b", 1, -5, "", 0.0)
    assert drain(queue) == ["high", "mid", "low-a", "low-b"]
    assert list(queue.waiting_by_band()) == []


def test_fair_queue_aging_serves_an_old_low_band_waiter_first() -> None:
    queue: FairQueue[str] = FairQueue(aging_seconds=5.0)
    queue.push("low", 1, 0, "", 0.0)
    for number in range(3):
        queue.push(f"high{number}", 1, 10, "", 1.0 + number)
    assert queue.head(4.9).item == "high0"  # type: ignore[union-attr]
    assert drain(queue, now=5.0)[0] == "low"


def test_fair_queue_without_aging_keeps_a_low_band_waiting_behind_any_stream() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("low", 1, 0, "", 0.0)
    for step in range(100):
        queue.push(f"high{step}", 1, 10, "", float(step))
        assert queue.head(1e9).item == f"high{step}"  # type: ignore[union-attr]
        queue.grant(queue.head(1e9))  # type: ignore[arg-type]
    assert drain(queue) == ["low"]


def test_fair_queue_removed_waiters_are_skipped_and_counted_out() -> None:
    queue: FairQueue[str] = FairQueue()
    entries = [queue.push(f"a{n}", 10, 0, "a", 0.0) for n in range(3)]
    queue.push("b0", 10, 0, "b", 0.0)
    queue.remove(entries[0])
    queue.remove(entries[0])  # twice: a no-op
    queue.remove(entries[2])
    assert len(queue) == 2
    assert queue.oldest().item == "a1"  # type: ignore[union-attr]
    assert drain(queue) == ["b0", "a1"]  # a1 starts after a0's 10 bytes; a0 is not refunded
    assert len(queue) == 0


def test_fair_queue_bounds_one_tenants_waiters_per_band() -> None:
    queue: FairQueue[str] = FairQueue(max_tenant_depth=2)
    queue.push("a0", 1, 0, "a", 0.0)
    assert not queue.tenant_full(0, "a")
    queue.push("a1", 1, 0, "a", 0.0)
    assert queue.tenant_full(0, "a")
    assert not queue.tenant_full(0, "b")
    assert not queue.tenant_full(5, "a")
    assert not FairQueue[str]().tenant_full(0, "a")


def test_fair_queue_counts_waiters_per_band_and_tenants_waiting() -> None:
    queue: FairQueue[str] = FairQueue()
    for tenant in ("a", "b", "c"):
        queue.push(tenant, 1, 0, tenant, 0.0)
    queue.push("urgent", 1, 10, "a", 0.0)
    assert list(queue.waiting_by_band()) == [(10, 1), (0, 3)]
    assert queue.tenants_waiting == 4


def test_fair_queue_memory_stays_bounded_however_many_tenants_pass() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("anchor", 1 << 40, 0, "anchor", 0.0)  # keeps the band busy throughout
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for tenant in range(60_000):  # each remembered would hold about 1 KiB: 60 MiB
        queue.grant(queue.push("r", 1 << 20, 0, f"tenant-{tenant}", 0.0))
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    assert peak < 12 << 20, f"60,000 tenants took {peak:,} bytes at the peak"
    assert len(queue) == 1
