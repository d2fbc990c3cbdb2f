"""The deployment: Helm chart, kustomize, Dockerfile, dashboards, alert rules, Prometheus."""
