"""What one request costs, before anything is decided.

``pricer`` prices every image and video of a request read by ``sidecar.body`` (header
probes, guarded URL probes, or vLLM's own count: ``engine_prices``) and its text
(``sidecar.text``); ``assembly`` puts the priced parts together into a ``prediction``:
prompt tokens and KV bytes in whole blocks, the one rule serving and the replay share.
"""
