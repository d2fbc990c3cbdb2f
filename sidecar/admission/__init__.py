"""Admit, downscale, wait or reject.

``decision`` is the pure ``decide()`` over a prediction and the ``budgets`` in force;
``downscale`` plans the smaller images that fit; ``ledger`` holds the predicted KV of
requests in flight (FIFO); ``saturation`` holds new requests while vLLM reports itself full.
"""
