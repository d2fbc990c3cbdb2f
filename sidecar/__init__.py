"""vlm-sidecar: image-aware admission in front of vLLM, and a Prometheus exporter.

The pipeline, in the order a request flows through it:

1. ``request_body`` / ``images.refs``  find every image in the body (data URIs, URLs)
2. ``images.probe``                    width x height from the header bytes only
3. ``vision`` / ``model_profiles``     visual tokens per image for the served model
4. ``kv_geometry`` / ``prediction``    prompt tokens and KV bytes of the whole request
5. ``admission`` / ``kv_budget``       admit, downscale, wait or reject
6. ``proxy`` / ``upstream``            stream to vLLM and back, untouched unless rewritten
7. ``metrics`` / ``log``               histograms, decisions, latencies, one log line

The core (1-5, minus the ledger) is pure and synchronous; only the proxy, the upstream
client, the ledger and URL fetching do I/O.
"""

__version__ = "0.1.0"
