"""A request's body, read as vLLM 0.33 reads it: its fields, media and prompts.

``body_lift`` swaps the body's large strings for placeholders before the parse
(``body_json``, at orjson's speed with vLLM's reading of numbers); ``request_body`` reads the
fields that matter, looking the route's reader up in ``readers``: ``shapes`` for the chat
family, ``pool_shapes`` for pooling, scoring and token ids, ``multipart`` for the audio
forms. ``refs`` walks a parsed body for images, other media and prompt text (``input_image``:
vLLM's check of a Responses-style image part); ``lax_values`` reads JSON values as vLLM's
lax pydantic models do. Nothing here prices anything.
"""
