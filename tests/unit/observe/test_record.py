"""observe.record: the prediction error split into its image and text parts; the log line."""

from __future__ import annotations

import orjson
import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from sidecar.admission.decision import Admit
from sidecar.observe.metrics import Metrics
from sidecar.observe.record import LOGGED_ITEMS, RequestRecord, prediction_error_split
from sidecar.observe.usage import Usage
from sidecar.routes import Route
from tests.support.predictions import HD, ICON, predict


def test_prediction_error_split_needs_vllms_image_token_count() -> None:
    assert prediction_error_split(Usage(500, 4, None), predict([HD])) is None


def test_prediction_error_split_parts_add_up_to_the_whole_error() -> None:
    prediction = predict([HD, ICON], text_tokens=100)
    usage = Usage(prediction.prompt_tokens + 7, 4, prediction.image_tokens + 10)
    image_error, text_error = prediction_error_split(usage, prediction) or (None, None)
    assert (image_error, text_error) == (10, -3)


def test_record_log_line_stays_small_when_a_request_carries_thousands_of_images() -> None:
    prediction = predict([HD, ICON] * 1000)
    record = RequestRecord("r" * 32, Route.CHAT)
    record.apply(Admit(prediction))
    with capture_logs() as logs:
        record.finish(Metrics(CollectorRegistry(), model="m"), structlog.get_logger())
    (line,) = logs
    assert len(orjson.dumps(line)) < 8 * 1024  # Docker's json-file driver splits at 16 KiB
    images = line["images"]
    assert len(images) == LOGGED_ITEMS + 1
    assert images[-1]["more_images"] == 2000 - LOGGED_ITEMS
    assert images[-1]["tokens"] == sum(i.tokens.tokens for i in prediction.images[LOGGED_ITEMS:])
