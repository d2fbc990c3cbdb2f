"""Every body shape's reader: the one table ``request_body`` looks a route's reader up in."""

from __future__ import annotations

from sidecar.body import pool_shapes, shapes
from sidecar.body.shapes import Reader
from sidecar.routes import BodyShape

READERS: dict[BodyShape, Reader] = {
    BodyShape.CHAT: shapes.read_chat,
    BodyShape.CHAT_BATCH: shapes.read_chat_batch,
    BodyShape.COMPLETIONS: shapes.read_completions,
    BodyShape.RESPONSES: shapes.read_responses,
    BodyShape.MESSAGES: shapes.read_messages,
    BodyShape.COHERE_CHAT: shapes.read_cohere_chat,
    BodyShape.TOKENIZE: shapes.read_tokenize,
    BodyShape.EMBEDDINGS: pool_shapes.read_embeddings,
    BodyShape.COHERE_EMBED: pool_shapes.read_cohere_embed,
    BodyShape.POOLING: pool_shapes.read_embeddings,
    BodyShape.SCORE: pool_shapes.read_score,
    BodyShape.RERANK: pool_shapes.read_rerank,
    BodyShape.GENERATIVE_SCORING: pool_shapes.read_generative_scoring,
    BodyShape.GENERATE: pool_shapes.read_generate,
    BodyShape.INVOCATIONS: pool_shapes.read_invocations,
    BodyShape.STRUCTURED_DECISION: shapes.read_structured_decision,
    BodyShape.DECISIONS: shapes.read_decisions,
}
