"""Request paths read as vLLM's server reads them, or refused where that is ambiguous."""

from __future__ import annotations

import pytest

from sidecar.routes import PathKind, Route
from sidecar.serve.paths import AmbiguousPathError, read_target


@pytest.mark.parametrize(
    ("raw", "route"),
    [
        ("/v1/chat/completions", Route.CHAT),
        ("/v1/chat/%63ompletions", Route.CHAT),
        ("/%76%31/chat/completions", Route.CHAT),
        ("/v1/chat/completions?x=1%2F", Route.CHAT),
        ("/v1/chat/completions#fragment", Route.CHAT),
        ("/v1/messages", Route.MESSAGES),
        ("/invocations", Route.INVOCATIONS),
        ("/v1/chat/completions/batch", Route.CHAT_BATCH),
        ("/v2/rerank", Route.RERANK_V2),
    ],
    ids=[
        "plain",
        "encoded-letter",
        "encoded-prefix",
        "query",
        "fragment",
        "messages",
        "invocations",
        "batch",
        "rerank-v2",
    ],
)
def test_paths_every_spelling_of_an_inspected_route_is_that_route(raw: str, route: Route) -> None:
    target = read_target(raw)
    assert target.kind is PathKind.INSPECTED
    assert target.route is route
    assert target.path_qs.partition("?")[0] == route.path


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("/v1/chat%2Fcompletions", "encoded slash"),
        ("/v1%2fchat%2Fcompletions", "encoded slash"),
        ("/v1/chat%5Ccompletions", "encoded slash or a backslash"),
        ("/v1/./chat/completions", "dot segment"),
        ("/v1/x/../chat/completions", "dot segment"),
        ("/v1/x/%2e%2e/chat/completions", "dot segment"),
        ("//v1/chat/completions", "empty segment"),
        ("/v1//chat/completions", "empty segment"),
        ("/v1/chat/completions%0A", "control"),
        ("/v1/chat/completions%00", "control"),
        ("/v1/%ff/completions", "not UTF-8"),
        ("/v1/%C3%A9", "non-ASCII"),
        ("http://vllm:8000/v1/chat/completions", "start with /"),
        ("*", "start with /"),
    ],
    ids=lambda value: value[:24],
)
def test_paths_ambiguous_targets_are_refused_rather_than_guessed(raw: str, why: str) -> None:
    with pytest.raises(AmbiguousPathError, match=why) as caught:
        read_target(raw)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("/health", PathKind.PASSED),
        ("/v1/models", PathKind.PASSED),
        ("/v1/responses/resp_123", PathKind.PASSED),
        ("/v1/responses/resp_123/cancel", PathKind.PASSED),
        ("/metrics", PathKind.METRICS),
        ("/metricsanything", PathKind.METRICS),
        ("/sleep", PathKind.ADMIN),
        ("/collective_rpc", PathKind.ADMIN),
        ("/adapters/my-lora", PathKind.ADMIN),
        ("/v1/load_lora_adapter", PathKind.ADMIN),
        ("/v1/realtime", PathKind.UNPRICEABLE),
        ("/v1/chat/completion", PathKind.UNKNOWN),
        ("/V1/chat/completions", PathKind.UNKNOWN),
        ("/", PathKind.UNKNOWN),
        ("/no/such/", PathKind.UNKNOWN),
    ],
    ids=lambda value: str(value)[:30],
)
def test_paths_other_paths_are_classified_as_vllm_routes_them(raw: str, kind: PathKind) -> None:
    target = read_target(raw)
    assert target.kind is kind
    assert target.route is None
    assert target.redirect_to is None


@pytest.mark.parametrize(
    ("raw", "location"),
    [
        ("/v1/chat/completions/", "/v1/chat/completions"),
        ("/v1/chat/completions//", "/v1/chat/completions"),
        ("/v1/models/?a=1", "/v1/models?a=1"),
        ("/v1/models%2F", None),  # an encoded slash is refused before any redirect
    ],
    ids=["one-slash", "two-slashes", "query-kept", "encoded"],
)
def test_paths_a_trailing_slash_on_a_known_route_redirects_to_it(
    raw: str, location: str | None
) -> None:
    if location is None:
        with pytest.raises(AmbiguousPathError):
            read_target(raw)
        return
    target = read_target(raw)
    assert target.redirect_to is not None
    redirect = read_target(target.redirect_to + ("?" + target.query if target.query else ""))
    assert redirect.path_qs == location


def test_paths_forwarded_path_is_reencoded_so_vllm_decodes_the_same_path() -> None:
    target = read_target("/v1/responses/id%20with%20space?stream=true")
    assert target.path == "/v1/responses/id with space"
    assert target.path_qs == "/v1/responses/id%20with%20space?stream=true"
