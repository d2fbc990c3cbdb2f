"""Unit tests of ``sidecar.images``."""
