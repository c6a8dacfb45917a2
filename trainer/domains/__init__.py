"""Our sample business domains, each an MCP server over SQLite built with `trainer.domains.kit`.

`DOMAINS` maps a domain name (== the scenario's `world_state` server name) to a factory that
returns a fresh in-process `MCPServer` with its own session state; call it once per episode.
`domain(name)` returns the `Domain` object itself (tools, snapshot, golden cache).

To add a domain: a package `trainer/domains/<name>/` exposing `DOMAIN = Domain(...)`, and one
line in `_MODULES`. Modules are imported on first use, so listing domains costs nothing. A domain
whose tools live in modules of their own defines `DOMAIN` in its `domain.py`, which they import
(the package imports them and re-exports `DOMAIN`: no module imports its package back).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from trainer.domains.kit import Domain, DomainServer

_MODULES = {
    "toy": "trainer.domains.toy",
    "property": "trainer.domains.property",
    "telecom": "trainer.domains.telecom",
    "procurement": "trainer.domains.procurement",
}


def domain(name: str) -> Domain:
    """The `Domain` registered under `name` (KeyError names the known domains)."""
    if name not in _MODULES:
        raise KeyError(f"unknown domain {name!r}; known: {', '.join(sorted(_MODULES))}")
    return importlib.import_module(_MODULES[name]).DOMAIN


def _factory(name: str) -> Callable[[], DomainServer]:
    def create_server() -> DomainServer:
        return domain(name).create_server()

    create_server.__name__ = f"create_{name}_server"
    create_server.__doc__ = f"A fresh in-process MCP server of the {name!r} domain (one per session)."
    return create_server


DOMAINS: dict[str, Callable[[], DomainServer]] = {name: _factory(name) for name in _MODULES}

__all__ = ["DOMAINS", "domain"]
