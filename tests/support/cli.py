"""Running the ``vlm-sidecar`` command line in process, as the tests of ``sidecar.cli`` do."""

from __future__ import annotations

import io

from sidecar.cli.commands import main


def run_cli(*argv: str) -> tuple[int, str]:
    """``vlm-sidecar *argv``: its exit status and what it printed to stdout."""
    out = io.StringIO()
    status = main(list(argv), out)
    return status, out.getvalue()
