"""Unit tests of ``sidecar.admission``."""
