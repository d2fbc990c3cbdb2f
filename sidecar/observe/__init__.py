"""What the sidecar reports: Prometheus ``metrics`` and their ``labels``, the per-request
``record`` that becomes one ``request.finished`` log line (``log``), and the ``usage`` vLLM
reported, read from the relayed answer."""
