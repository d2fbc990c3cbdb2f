"""Unit tests of ``sidecar.cli``."""
