"""Admit, downscale, wait or reject.

``decision`` is the pure ``decide()`` over a prediction and the ``budgets`` in force;
``downscale`` plans the smaller images that fit; ``ledger`` holds the predicted KV of
requests in flight, and its waiters in the order ``fair_queue`` keeps for the classes
``discipline`` gives them (priority bands, fair by KV between tenants; FIFO without
headers); ``saturation`` holds new requests while vLLM
reports itself full.
"""
