"""Request bodies for the body-shape tests, parsed as the proxy parses them."""

from __future__ import annotations

from typing import Any

import orjson

from sidecar.body.request_body import BodyPolicy, RequestBody, parse_request_body
from sidecar.routes import Route

# A tiny inline PNG (its header only) as a URI and as a chat part, and a URL image part.
URI = "data:image/png;base64,iVBORw0KGgo="
IMAGE = {"type": "image_url", "image_url": {"url": URI}}
URL_IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}


def user(*parts: Any) -> dict[str, Any]:
    """A user turn: a short text, then ``parts``."""
    return {"role": "user", "content": [{"type": "text", "text": "hello"}, *parts]}


def parse(route: Route, policy: BodyPolicy | None = None, **fields: Any) -> RequestBody:
    """``fields`` sent as a JSON body to ``route``."""
    return parse_request_body(orjson.dumps(fields), route, policy=policy)
