"""The budget advisor: replay recorded traffic under candidate settings, and recommend them.

Everything here is pure and synchronous over records; the commands in ``cli.advise`` read
files or Prometheus and print.

- ``records``      the traffic log's lines (``observe.traffic`` writes them) as typed records
- ``candidates``   the recorded settings (or the environment's) with ``--set`` applied
- ``repricing``    one record under candidate settings, with the same code ``serve`` runs:
  the profile's vision rule, ``predict_request`` and ``decide`` (downscale planning included)
- ``priced``       that answer: decision, reason, what it forwards
- ``fastpath``     the same answers per request without rebuilding the prediction, worked
  out once per image shape (checked against ``decide`` on random traffic)
- ``cached_rule``  the vision rule and KV geometry, memoized
- ``simulation``   the in-flight KV ledger and its FIFO queue over the recorded arrivals and
  service times, as ``admission.ledger`` behaves
- ``replay``       both together: each distinct cost's answer, and what the ledger changed
- ``tally``, ``report``  a replay counted per distinct answer, and the report: decisions,
  costs before and after, queueing
- ``sweep``, ``recommend``  ``advise``: budgets swept, the Pareto front, a recommendation,
  the env block and Helm values
- ``workers``      the sweep's candidates spread over forked processes
- ``prometheus``   a bucket-level synthetic traffic from the sidecar's histograms (an estimate)
- ``chart``        the trade-off as a PNG (matplotlib, the optional ``plot`` extra)
"""
