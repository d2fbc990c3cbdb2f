"""Unit tests of ``sidecar.vision``."""
