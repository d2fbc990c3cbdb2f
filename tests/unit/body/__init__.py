"""Unit tests of ``sidecar.body``."""
