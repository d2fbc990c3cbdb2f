"""Unit tests of ``sidecar.images.headers``."""
