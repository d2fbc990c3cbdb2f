"""vlm-sidecar: image-aware admission in front of vLLM, and a Prometheus exporter.

The pipeline, in the order a request flows through it:

1. ``request_body`` / ``body_lift`` / ``images.refs``   find every image and video in the body
2. ``images.probe`` / ``images.headers`` / ``video``   size from the header bytes only
                                                       (``images.remote``: guarded URL probes)
3. ``vision`` / ``model_profiles`` / ``model_config``  tokens per image for the served model
4. ``text_tokens`` / ``pricing`` / ``prediction``      prompt tokens of the whole request
   ``kv_geometry``                                     and its KV bytes, in whole blocks
5. ``admission`` / ``downscale_plan`` / ``kv_budget``  admit, downscale, wait or reject
6. ``rewrite`` / ``images.downscale``                  smaller images spliced into the body
7. ``proxy`` / ``upstream`` / ``usage``                stream to vLLM and back, read usage
8. ``metrics`` / ``request_record`` / ``log``          histograms, decisions, one log line

Around it: ``settings`` (every ``SIDECAR_*`` variable), ``app`` / ``state`` / ``server``
(construction, the two listeners, the drain), ``discovery`` / ``closed_loop`` (what vLLM
reports about itself), ``errors`` / ``error_responses`` (failures as HTTP answers),
``capacity_plan`` and ``cli`` (the commands), ``standin`` and ``demo`` (a stand-in for vLLM).

The core (1-5, minus the ledger) is pure and synchronous; only the proxy, the upstream
client, the ledger, discovery and URL fetching do I/O.
"""

__version__ = "0.1.0"
