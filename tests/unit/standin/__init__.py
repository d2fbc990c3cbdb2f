"""Unit tests of ``sidecar.standin``."""
