"""A request-target read as vLLM's server reads it, or refused where that is ambiguous.

vLLM's server (uvicorn) percent-decodes the whole path before Starlette routes it, so
``/v1%2Fchat%2Fcompletions`` and ``/v1/chat/%63ompletions`` both reach the chat handler;
it does not remove dot segments or merge slashes; and Python's ``$`` lets one trailing
``%0A`` still match a route. The sidecar decodes the same way, so no spelling of an
inspected route escapes inspection, and forwards the decoded path, so vLLM routes it to the
handler the sidecar priced for. It refuses, with a 400, what it will not guess about: an
encoded slash or backslash, a dot segment, an empty segment, a control or non-ASCII
character, an absolute-form target. A trailing slash on a known route gets vLLM's own answer,
a 307 to the path without it, with a relative ``Location``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from sidecar.errors import InvalidRequestError
from sidecar.routes import ROUTES_BY_PATH, PathKind, Route, match_path

_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_SAFE_PATH_CHARACTERS = "/:@!$&'()*+,;=-._~"  # RFC 3986 pchar and "/": sent as they are


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes: its decoded path, what that path is, and the query as sent."""

    path: str
    kind: PathKind
    query: str  # without "?", exactly as the client sent it
    route: Route | None = None  # for an inspected path
    redirect_to: str | None = None  # a trailing-slash spelling of a known route

    @property
    def path_qs(self) -> str:
        """The path vLLM routes as the sidecar did, re-encoded, with the query as sent."""
        encoded = quote(self.path, safe=_SAFE_PATH_CHARACTERS)
        return f"{encoded}?{self.query}" if self.query else encoded


class AmbiguousPathError(InvalidRequestError):
    """A request-target the sidecar will not guess how vLLM routes."""

    def __init__(self, raw_path: str, why: str) -> None:
        super().__init__(f"the request path {raw_path[:200]!r} is ambiguous: {why}")


def read_target(raw_target: str) -> Target:
    """The ``Target`` of a raw request-target (path and query, as on the request line)."""
    if not raw_target.startswith("/"):
        raise AmbiguousPathError(raw_target, "only targets that start with / are served")
    raw_path, _, query = raw_target.partition("?")
    raw_path = raw_path.partition("#")[0]
    if _ENCODED_SEPARATOR.search(raw_path) or "\\" in raw_path:
        raise AmbiguousPathError(raw_target, "it holds an encoded slash or a backslash")
    try:
        path = unquote(raw_path, errors="strict") if "%" in raw_path else raw_path
    except UnicodeDecodeError:
        raise AmbiguousPathError(raw_target, "it holds an encoded byte that is not UTF-8") from None
    if not path.isascii() or not path.isprintable():
        raise AmbiguousPathError(raw_target, "it holds a control or non-ASCII character")
    if any(segment in (".", "..") for segment in path.split("/")):
        raise AmbiguousPathError(raw_target, "it holds a dot segment")
    stripped = path.rstrip("/")
    if stripped != path and stripped and (kind := match_path(stripped)) is not PathKind.UNKNOWN:
        return Target(path, kind, query, redirect_to=stripped)
    if "" in path.rstrip("/").split("/")[1:]:
        raise AmbiguousPathError(raw_target, "it holds an empty segment")
    return Target(path, match_path(path), query, route=ROUTES_BY_PATH.get(path))
