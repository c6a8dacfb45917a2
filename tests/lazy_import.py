"""`lazy("scipy.integrate", "quad")`: a module, or one of its attributes, imported when a test first
uses it rather than when pytest collects the test module. scipy and matplotlib take a second or more
each to import; a collection (`pytest --collect-only`, `-k`, a single test) should not pay for what
its tests never touch. Meant for library functions and namespaces (called, or read attributes of),
not for values handed on to code that checks their type."""

from __future__ import annotations

import importlib
from typing import Any


class lazy:  # noqa: N801 - used like the import it stands for
    def __init__(self, module: str, attr: str | None = None):
        self._module, self._attr = module, attr

    def _target(self) -> Any:
        mod = importlib.import_module(self._module)
        return getattr(mod, self._attr) if self._attr else mod

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"lazy({self._module!r}, {self._attr!r})"
