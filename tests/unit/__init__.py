"""Unit tests, one file per module of ``sidecar/``: ``unit/<stage>/test_<module>.py``."""
