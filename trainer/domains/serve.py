"""Run one of our domains as a stdio MCP server (one process = one session, as the reference does).

    uv run python -m trainer.domains.serve toy

`tbt serve-domain NAME` (trainer/domains_cli.py) is the same entry point on the command line.
"""

from __future__ import annotations

import sys

from trainer.domains import DOMAINS


def serve(name: str) -> None:
    """Serve domain `name` over stdio until the client closes the stream."""
    DOMAINS[name]().run("stdio")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in DOMAINS:
        sys.exit(f"usage: python -m trainer.domains.serve {{{','.join(sorted(DOMAINS))}}}")
    serve(sys.argv[1])
