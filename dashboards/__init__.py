"""Monitoring artefacts generated from code: the Grafana dashboard and the Prometheus rules.

``generate.py`` writes them (and the copies the Helm chart and kustomize base ship);
``grafana``/``promql`` build the dashboard JSON, ``vlm_sidecar`` defines its panels,
``rules`` the recording and alerting rules, ``rules_tests`` their promtool unit tests.
"""
