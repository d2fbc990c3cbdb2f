"""A request's text tokens: exact with the model's own template and tokenizer, or estimated.

``route_text`` renders a body as vLLM 0.33 does where the template can (chat and
completions prompts; ``chat_request`` with ``responses_input`` and ``messages_input`` for the
Responses and Anthropic shapes; ``conversation`` as the template sees the messages;
``chat_template`` compiled once, ``template_format`` read from its syntax tree) and counts it
with ``text_tokens``; otherwise ``text_estimate`` counts characters, plus the framing
``template_overhead`` measures.
"""
