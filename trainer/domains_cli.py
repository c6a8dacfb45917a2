"""`tbt serve-domain NAME`: one of our domains as a stdio MCP server (trainer/domains/serve.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from trainer.domains import DOMAINS
from trainer.domains.serve import serve


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
