"""observe.record: the prediction error split into its image and text parts."""

from __future__ import annotations

from sidecar.observe.record import prediction_error_split
from sidecar.observe.usage import Usage
from tests.support.predictions import HD, ICON, predict


def test_prediction_error_split_needs_vllms_image_token_count() -> None:
    assert prediction_error_split(Usage(500, 4, None), predict([HD])) is None


def test_prediction_error_split_parts_add_up_to_the_whole_error() -> None:
    prediction = predict([HD, ICON], text_tokens=100)
    usage = Usage(prediction.prompt_tokens + 7, 4, prediction.image_tokens + 10)
    image_error, text_error = prediction_error_split(usage, prediction) or (None, None)
    assert (image_error, text_error) == (10, -3)
