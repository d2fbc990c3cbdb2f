"""Unit tests of ``sidecar.cost``."""
