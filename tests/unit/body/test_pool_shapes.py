"""body.pool_shapes: the pooling, scoring and token-id bodies, and ``/invocations``' dispatch,
read through ``parse_request_body`` as the proxy reads them."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.body.refs import MediaSource
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route, Work
from tests.support.bodies import IMAGE, URI, parse, user


@pytest.mark.parametrize(
    ("fields", "images", "sequences"),
    [
        ({"input": "text"}, 0, 1),
        ({"input": ["a", "b", "c"]}, 0, 3),
        ({"input": [[1, 2], [3]]}, 0, 2),
        ({"input": [user(IMAGE)]}, 1, 1),
        ({"input": [[user(IMAGE)], [user(IMAGE)]]}, 2, 2),
        ({"messages": [user(IMAGE, IMAGE)]}, 2, 1),
    ],
    ids=["text", "texts", "token-ids", "chat", "chats", "messages"],
)
def test_pool_shapes_embeddings_read_text_ids_and_chat_forms(
    fields: dict[str, Any], images: int, sequences: int
) -> None:
    body = parse(Route.EMBEDDINGS, **fields)
    assert len(body.images) == images
    assert len(body.sequences) == sequences
    assert body.work is Work.POOL


def test_pool_shapes_pooling_plugin_data_cannot_be_priced() -> None:
    with pytest.raises(InvalidRequestError, match="plugin"):
        parse(Route.POOLING, data={"image": URI})


def test_pool_shapes_cohere_embed_images_are_images() -> None:
    body = parse(Route.COHERE_EMBED, images=[URI, "https://example.com/a.png"])
    assert [ref.source for ref in body.images] == [MediaSource.DATA, MediaSource.URL]
    assert len(body.sequences) == 2
    inputs = parse(Route.COHERE_EMBED, inputs=[{"content": [{"type": "text", "text": "x"}, IMAGE]}])
    assert len(inputs.images) == 1


def test_pool_shapes_score_pairs_the_query_with_every_document() -> None:
    body = parse(Route.SCORE, queries="what", documents=["a", {"content": [IMAGE]}, "bb"])
    assert len(body.sequences) == 3
    assert [s.text_chars for s in body.sequences] == [5, 4, 6]
    assert body.sequences[1].images == (0,)


def test_pool_shapes_score_refuses_unpaired_lists() -> None:
    with pytest.raises(InvalidRequestError, match="paired"):
        parse(Route.SCORE, text_1=["a", "b"], text_2=["c", "d", "e"])


def test_pool_shapes_rerank_reads_query_and_documents() -> None:
    body = parse(Route.RERANK_V1, query={"content": [IMAGE]}, documents=["x", "y"])
    assert [s.images for s in body.sequences] == [(0,), (0,)]


def test_pool_shapes_generative_scoring_is_one_token_per_item() -> None:
    body = parse(Route.GENERATIVE_SCORING, query="q", items=["a", "b"])
    assert len(body.sequences) == 2
    assert body.max_output_tokens == 1


def test_pool_shapes_generative_scoring_reads_a_query_list_as_token_ids() -> None:
    # Found by the differential tier: vLLM's query is ``str | list[int]``, so ["140"] is the
    # token id 140 before each item, not a text (there is no list[str] member to take it).
    body = parse(Route.GENERATIVE_SCORING, query=["140", 7], items=["a", "b"])
    assert [s.token_ids for s in body.sequences] == [2, 2]
    with pytest.raises(InvalidRequestError, match="string or token ids"):
        parse(Route.GENERATIVE_SCORING, query=["x"], items=["a"])


def test_pool_shapes_a_list_of_lists_holds_token_ids_however_spelled() -> None:
    # The list[list[int]] member reads [["1", "2"]] as ids: no list[list[str]] member exists.
    body = parse(Route.GENERATIVE_SCORING, query="q", items=[["1", "2"], [3]])
    assert [s.token_ids for s in body.sequences] == [2, 1]
    assert [s.token_ids for s in parse(Route.COMPLETIONS, prompt=[["1", "2"]]).sequences] == [2]


def test_pool_shapes_generate_counts_token_ids_and_fetched_media() -> None:
    body = parse(
        Route.GENERATE,
        token_ids=list(range(50)),
        sampling_params={"max_tokens": 8, "n": 2},
        content_parts=[{"type": "image_url", "url": "https://example.com/x.png"}],
    )
    assert body.sequences[0].token_ids == 50
    assert body.images[0].source is MediaSource.URL
    assert (body.max_output_tokens, body.n) == (8, 2)


@pytest.mark.parametrize(
    ("fields", "work", "images"),
    [
        ({"messages": [user(IMAGE)]}, Work.GENERATE, 1),
        ({"prompt": "hello"}, Work.GENERATE, 0),
        ({"input": [user(IMAGE)]}, Work.POOL, 1),
        ({"query": "q", "documents": ["a"]}, Work.POOL, 0),
        ({"queries": "q", "items": ["a"]}, Work.POOL, 0),
    ],
    ids=["chat", "completion", "embedding", "rerank", "score"],
)
def test_pool_shapes_invocations_dispatch_as_vllm_does(
    fields: dict[str, Any], work: Work, images: int
) -> None:
    body = parse(Route.INVOCATIONS, **fields)
    assert body.work is work
    assert len(body.images) == images


def test_pool_shapes_invocations_with_no_known_shape_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="suitable handler"):
        parse(Route.INVOCATIONS, something="else")


@pytest.mark.parametrize(
    ("route", "fields", "message"),
    [
        (Route.EMBEDDINGS, {"messages": "hello"}, "'messages' must be a list"),
        (Route.COHERE_EMBED, {"truncate": "END"}, "One of 'texts', 'images' or 'inputs'"),
        (Route.COHERE_EMBED, {"texts": "one"}, "'texts' must be a list"),
        (Route.RERANK_V1, {"query": "q"}, "needs 'query' and 'documents'"),
        (Route.SCORE, {"queries": "q"}, "needs queries and documents"),
        (Route.SCORE, {"queries": "q", "documents": [3]}, "must be a string or an object"),
        (Route.GENERATE, {"token_ids": []}, "'token_ids' must be a non-empty list"),
        (
            Route.GENERATE,
            {"token_ids": [1], "content_parts": ["image_url"]},
            "Each content part must be an object",
        ),
    ],
    ids=[
        "embeddings-messages-not-a-list",
        "cohere-nothing-to-embed",
        "cohere-texts-not-a-list",
        "rerank-without-documents",
        "score-without-documents",
        "score-document-of-a-number",
        "generate-without-token-ids",
        "generate-part-not-an-object",
    ],
)
def test_pool_shapes_refuse_what_vllm_refuses_naming_the_field(
    route: Route, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse(route, **fields)


@pytest.mark.parametrize(
    "part",
    [{}, {"": None}, {"type": "file_url", "url": "x"}, {"type": "image"}, {"type": ["image_url"]}],
    ids=["empty", "no-type", "file-url", "image-without-url-suffix", "type-not-a-string"],
)
def test_pool_shapes_generate_skips_a_content_part_vllm_skips(part: dict[str, Any]) -> None:
    # vLLM 0.32 and 0.33 fetch only image_url, video_url and audio_url parts; the rest cost
    # nothing and are not refused (the differential tier's false refusal of [{}]).
    body = parse(Route.GENERATE, token_ids=[1, 2], content_parts=[part])
    assert (body.images, body.media) == ((), ())


def test_pool_shapes_generate_reads_each_media_type_of_content_parts() -> None:
    parts = [
        {"type": "image_url", "url": "http://127.0.0.1/a.png"},
        {"type": "video_url", "url": "http://127.0.0.1/a.mp4"},
        {"type": "audio_url", "url": "http://127.0.0.1/a.wav"},
    ]
    body = parse(Route.GENERATE, token_ids=[1, 2], content_parts=parts)
    assert len(body.images) == 1
    assert [item.kind for item in body.media] == ["video", "audio"]
