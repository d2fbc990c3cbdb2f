"""Every failure the sidecar reports, and how each becomes an HTTP answer.

Two roots: ``SidecarError`` is one request's failure and always becomes an HTTP answer
(``serve.responses`` maps it); ``ConfigurationError`` stops start-up and never reaches a
client. The hierarchy::

    SidecarError                      carries status, error type, reason, param
    ├── InvalidRequestError           400  the client's body is wrong
    │   ├── ImageError                400  one image cannot be priced
    │   │   ├── NotBase64Error               the payload is not strict base64
    │   │   ├── TruncatedImageError          the bytes end before the size is known
    │   │   ├── NotAnImageError              no known format recognises the bytes
    │   │   ├── EmptyImageError              the header claims a zero width or height
    │   │   ├── ImageTooLargeError           the header claims more pixels than allowed
    │   │   └── UnsupportedImageSizeError    the model's processor refuses the size
    │   └── VideoError                400  one video cannot be read, or its processor refuses it
    ├── AdminRouteError               403  an admin route (SIDECAR_ADMIN_ROUTES)
    ├── UnknownRouteError             404  a route the sidecar cannot price (SIDECAR_UNKNOWN_ROUTES)
    ├── RequestTimeoutError           408  the body did not arrive in time
    ├── BodyTooLargeError             413  the body exceeds SIDECAR_MAX_BODY_BYTES
    ├── LargerThanBudgetError         413  one request exceeds the whole in-flight KV budget
    ├── OverloadedError               429  the in-flight budget stayed full
    │   ├── QueueFullError            429  SIDECAR_MAX_QUEUE_DEPTH requests already wait
    │   ├── ShedError                 429  a sheddable request would have had to wait
    │   └── EngineSaturatedError      429  vLLM reported saturation throughout
    └── UpstreamError                 502
        └── UpstreamTimeoutError      504

    ConfigurationError                a setting or model profile is invalid (start-up only)

Each ``type`` follows from the status (``ERROR_TYPES``), a name in the style vLLM gives its own
(``BadRequestError``, ``NotFoundError``, ``PermissionDeniedError``; ``RateLimitError`` and the
others where vLLM never answers with that status), never an HTTP reason phrase.
Outcomes that are not failures (admit, downscale, wait) are values, see ``admission``.
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import ClassVar, Self

# The names vLLM 0.33 itself gives its errors, by status
# (``entrypoints/serve/exception_handling/error_response.py``); it answers any other status
# with its reason phrase. The stand-in answers with these.
VLLM_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    500: "InternalServerError",
    501: "NotImplementedError",
}
# The sidecar's: vLLM's own names, and the same style for the statuses vLLM never answers with.
ERROR_TYPES = VLLM_ERROR_TYPES | {
    403: "PermissionDeniedError",
    408: "RequestTimeoutError",
    413: "RequestTooLargeError",
    429: "RateLimitError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}


def error_type_for(status: int) -> str:
    """The ``type`` for a status, as vLLM names its errors."""
    words = re.findall(r"[A-Za-z]+", HTTPStatus(status).phrase)
    return ERROR_TYPES.get(status) or "".join(w[:1].upper() + w[1:] for w in words) + "Error"


class SidecarError(Exception):
    """Base of every error the sidecar raises on purpose; its ``type`` follows its status."""

    status: ClassVar[int] = HTTPStatus.INTERNAL_SERVER_ERROR
    error_type: ClassVar[str] = error_type_for(HTTPStatus.INTERNAL_SERVER_ERROR)
    # The ``Reason`` value (``admission.decision``, a later stage) a request that ends in
    # this error is logged and counted under; a refused body unless a class says otherwise.
    reason: ClassVar[str] = "invalid_body"
    # False: no retry can change the answer (SDKs read ``x-should-retry: false``); None: the
    # answer does not say.
    retryable: ClassVar[bool | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.error_type = error_type_for(cls.status)

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def prefixed(self, context: str) -> Self:
        """The same error with ``context: `` before its message (e.g. which image)."""
        self.message = f"{context}: {self.message}"
        self.args = (self.message,)
        return self


class InvalidRequestError(SidecarError):
    """The request body cannot be served as sent."""

    status = HTTPStatus.BAD_REQUEST


class ImageError(InvalidRequestError):
    """One image cannot be read or priced."""

    reason = "invalid_image"

    def __init__(self, message: str, *, param: str | None = "image_url") -> None:
        super().__init__(message, param=param)


class NotBase64Error(ImageError):
    """The payload contains characters outside the strict base64 alphabet."""


class TruncatedImageError(ImageError):
    """The bytes end before the header gives the image size."""


class NotAnImageError(ImageError):
    """No supported image format recognises the bytes."""


class EmptyImageError(ImageError):
    """The header claims a width or height of zero."""


class ImageTooLargeError(ImageError):
    """The header claims more pixels than the hard limit allows."""


class UnsupportedImageSizeError(ImageError):
    """The model's own processor refuses this size (for example Qwen's aspect-ratio limit)."""


class VideoError(InvalidRequestError):
    """One video cannot be read (not base64, not a container FFmpeg opens, no video stream)
    or the model's processor refuses it (too few frames, aspect ratio)."""

    def __init__(self, message: str, *, param: str | None = "video_url") -> None:
        super().__init__(message, param=param)


class AdminRouteError(SidecarError):
    """One of vLLM's admin routes, refused unless SIDECAR_ADMIN_ROUTES=pass."""

    status = HTTPStatus.FORBIDDEN


class UnknownRouteError(SidecarError):
    """A route the sidecar cannot price, refused unless SIDECAR_UNKNOWN_ROUTES=pass."""

    status = HTTPStatus.NOT_FOUND


class RequestTimeoutError(SidecarError):
    """The client did not send its whole body within SIDECAR_CLIENT_READ_TIMEOUT_SECONDS."""

    status = HTTPStatus.REQUEST_TIMEOUT


class BodyTooLargeError(SidecarError):
    """The request body exceeds SIDECAR_MAX_BODY_BYTES."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    reason = "body_too_large"


class LargerThanBudgetError(SidecarError):
    """One request needs more KV than the whole in-flight budget: no wait, and no replica
    with the same budget, will ever serve it, so clients are told not to retry."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    reason = "larger_than_kv_budget"
    retryable = False


# Every 429 is this replica's load, never the request's size: a gateway may retry it elsewhere.
OTHER_REPLICA = "this replica is busy, not the service: another replica may serve it now"


class OverloadedError(SidecarError):
    """The in-flight KV budget stayed full for the whole queue timeout."""

    status = HTTPStatus.TOO_MANY_REQUESTS
    reason = "queue_timeout"

    def __init__(self, message: str, *, retry_after_seconds: int) -> None:
        super().__init__(f"{message} ({OTHER_REPLICA})")
        self.retry_after_seconds = retry_after_seconds


class QueueFullError(OverloadedError):
    """The queue for the in-flight budget is at SIDECAR_MAX_QUEUE_DEPTH."""

    reason = "queue_full"


class ShedError(OverloadedError):
    """A sheddable request (negative priority) found the budget full, or vLLM saturated:
    refused at once, never queued."""

    reason = "shed"


class EngineSaturatedError(OverloadedError):
    """vLLM reported saturation for the whole queue timeout."""

    reason = "engine_saturated"


class UpstreamError(SidecarError):
    """vLLM could not be reached or broke the connection."""

    status = HTTPStatus.BAD_GATEWAY
    reason = "upstream_error"


class UpstreamTimeoutError(UpstreamError):
    """vLLM did not answer in time."""

    status = HTTPStatus.GATEWAY_TIMEOUT


class ConfigurationError(Exception):
    """A setting or model profile is invalid; raised at start-up, never per request."""
