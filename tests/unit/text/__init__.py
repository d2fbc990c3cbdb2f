"""Unit tests of ``sidecar.text``."""
