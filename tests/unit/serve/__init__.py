"""Unit tests of ``sidecar.serve``."""
