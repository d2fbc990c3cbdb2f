"""The routes the sidecar inspects: where each lies, its metric label, and its API's shape.

One table that the router, the request parser, the metrics' ``route`` label, the error
answers, README and the tests all read, so no list of routes is written twice.
"""

from __future__ import annotations

from enum import Enum, StrEnum


class ApiShape(StrEnum):
    """Whose wire format a route speaks: it decides the shape of error bodies and streams."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"


class Route(Enum):
    """An inspected POST route: ``(path, metric label, API shape)``."""

    CHAT = ("/v1/chat/completions", "chat_completions", ApiShape.OPENAI)
    COMPLETIONS = ("/v1/completions", "completions", ApiShape.OPENAI)
    RESPONSES = ("/v1/responses", "responses", ApiShape.OPENAI)
    MESSAGES = ("/v1/messages", "messages", ApiShape.ANTHROPIC)

    def __init__(self, path: str, label: str, api: ApiShape) -> None:
        self.path = path
        self.label = label
        self.api = api

    @property
    def anthropic(self) -> bool:
        """Whether errors and broken streams take Anthropic's shape."""
        return self.api is ApiShape.ANTHROPIC


ROUTE_LABELS = tuple(route.label for route in Route)
ROUTES_BY_PATH = {route.path: route for route in Route}
