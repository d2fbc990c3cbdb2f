"""What one request costs, before anything is decided.

``body_lift`` and ``request_body`` read the fields that matter from a route's body without
walking its payloads; ``pricer`` prices every image and video (header probes, guarded URL
probes) and the text (``text_tokens``: exact with the model's template and tokenizer, else
an estimate); ``prediction`` adds it up into prompt tokens and KV bytes in whole blocks.
"""
