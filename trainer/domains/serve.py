"""Run one of our domains as a stdio MCP server (one process = one session, as the reference does).

    uv run python -m trainer.domains.serve toy

`serve_domain_command` is the same entry point as a typer command, for `tbt serve-domain NAME`.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from trainer.domains import DOMAINS


def serve(name: str) -> None:
    """Serve domain `name` over stdio until the client closes the stream."""
    DOMAINS[name]().run("stdio")


def serve_domain_command(
    name: Annotated[str, typer.Argument(help=f"Domain name: {', '.join(sorted(DOMAINS))}.")],
) -> None:
    """Serve one of our domains as an MCP server over stdio (reserved-tool protocol included).

    Example: tbt serve-domain toy
    """
    if name not in DOMAINS:
        typer.echo(f"unknown domain {name!r}; known: {', '.join(sorted(DOMAINS))}", err=True)
        raise typer.Exit(2)
    serve(name)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in DOMAINS:
        sys.exit(f"usage: python -m trainer.domains.serve {{{','.join(sorted(DOMAINS))}}}")
    serve(sys.argv[1])
