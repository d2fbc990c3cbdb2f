"""Unit tests of ``sidecar.video``."""
