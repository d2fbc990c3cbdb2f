"""``python -m sidecar`` and the ``vlm-sidecar`` console script."""

from __future__ import annotations

import sys

from sidecar.cli.commands import main as _cli_main


def main() -> None:
    """Console-script entry point."""
    sys.exit(_cli_main())


if __name__ == "__main__":
    main()
