"""The ``vlm-sidecar`` commands (``commands``), their tables (``tables``), the capacity
worksheet behind ``plan`` (``capacity``) and ``demo`` (the sidecar before a stand-in)."""
