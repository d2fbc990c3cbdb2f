"""Unit tests of ``sidecar.profiles``."""
