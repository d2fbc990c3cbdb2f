"""What one request costs, before anything is decided.

``body_lift`` and ``request_body`` read the fields that matter from a route's body without
walking its payloads; ``pricer`` prices every image and video (header probes, guarded URL
probes) and the text: exact with the model's template and tokenizer where ``route_text``
can render the body as vLLM 0.33 does (``chat_request``, ``responses_input``,
``messages_input``, ``conversation``, ``chat_template``, ``template_format``,
``text_tokens``), else ``text_estimate`` with the framing ``template_overhead`` measures;
``prediction`` adds it up into prompt tokens and KV bytes in whole blocks.
"""
