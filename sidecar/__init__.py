"""vlm-sidecar: image-aware admission in front of vLLM, and a Prometheus exporter.

The folders are the pipeline, in the order a request flows through it; a module imports
only from its own stage or an earlier one (``tests/unit/test_layout.py`` keeps it so):

0. ``settings`` ``errors`` ``units`` ``search`` ``routes``  shared leaves: every ``SIDECAR_*``
   variable, the failure tree, formatting, the route table
1. ``images/`` ``vision/`` ``video/``  size from header bytes only; tokens per image or video
   for each model family (``images.remote``: guarded URL probes; ``images.resize``: pixels)
   ``body/``       the request body read as vLLM reads it: its fields, media and prompts
2. ``profiles/``   the served model: vision rule, video rule and KV geometry, from a
   built-in name or a model directory
   ``text/``       text tokens: exact with the model's template and tokenizer, or estimated
3. ``cost/``       one request's price: its images, videos and text priced, then prompt
   tokens and KV bytes in whole blocks
4. ``admission/``  admit, downscale, wait or reject: the pure decision, the budgets, the
   downscale plan, the in-flight KV ledger, the order its waiters are served in (priority
   bands, KV-fair between tenants: ``admission.discipline``, ``admission.fair_queue``) and
   the saturation gate
5. ``engine/``     what vLLM reports about itself, and what it changes in the budgets; what
   it says an image costs (``/tokenize``): the rule's self-check, engine-calibrated pricing
6. ``observe/``    metrics, their labels, the request record and its one log line, usage,
   the traffic log (``observe.traffic``: one line per request, for replay), the router
   gauges an endpoint picker scores pods by (``observe.router_load``)
7. ``serve/``      the thin async shell: app and keys, server and drain, the proxy handler,
   the upstream relay, body rewriting, error answers
   ``advisor/``    offline: replay the traffic log under candidate settings (the same pricing
   and decision code, the ledger simulated), sweep budgets and recommend them
   ``standin/``    a stand-in for vLLM's HTTP API, for tests and the demo
8. ``cli/``        the commands: serve, tokens, plan (the capacity worksheet), demo, replay,
   advise

Stages 1-4 are pure and synchronous except the ledger, the saturation gate and URL probes;
only ``serve``, ``engine``'s watcher and URL fetching do network I/O.
"""

__version__ = "0.1.0"
