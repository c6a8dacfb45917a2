"""`thinkingbox.*` for test files when the ThinkingBox package is not installed (docs/tasks.md, "The `thinkingbox` shim").

Test files import from the framework. `install()` puts a finder on `sys.meta_path` that answers
for these module names with modules made of our objects:

    thinkingbox                      a package (nothing else in it)
    thinkingbox.common               Judge, TestContext, SessionClientFixture (a stand-in)
    thinkingbox.common.chat_types    Message, Text, ToolCall, ParallelToolCall, ToolResponse,
                                     MessageT, ToolCallResponse, TextMessageTag, TestContext
    thinkingbox.common.judge         Judge, JudgeException, safe_tag_encode (trainer.env.grading.judge's;
                                     JudgeException is our JudgeUnavailable)

The names are ours, not copies: `thinkingbox.common.chat_types.Text is trainer.env.grading.chat_types.Text`,
so a test's `isinstance(m, Text)` holds for the messages of our `TestContext`. Every other
`thinkingbox.*` name is missing, as from a partial install: the import fails, and
`import_error_message` says what was missing and what the shim offers instead. When the real
package is importable, `install()` does nothing: a user's installed framework always wins.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import types
from typing import Any

from trainer.env.grading import chat_types
from trainer.env.grading.context import TestContext
from trainer.env.grading.judge import Judge, JudgeUnavailable, safe_tag_encode


class SessionClientFixture:
    """Stand-in for the framework's live-session fixture (a test calling tools mid-grading).
    Files naming it load; building one fails: our tests grade the end state, not a live session."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("SessionClientFixture (tool calls from a test) is not supported here")


JudgeException = JudgeUnavailable  # the framework's name for "the judge could not answer"


_CHAT_NAMES = ("Message", "MessageT", "ParallelToolCall", "Text", "TextMessageTag", "ToolCall",
               "ToolCallResponse", "ToolResponse")

# module name -> what it holds; a name with submodules is a package
MODULES: dict[str, dict[str, Any]] = {
    "thinkingbox": {},
    "thinkingbox.common": {"Judge": Judge, "TestContext": TestContext, "SessionClientFixture": SessionClientFixture},
    "thinkingbox.common.chat_types": {**{n: getattr(chat_types, n) for n in _CHAT_NAMES}, "TestContext": TestContext},
    "thinkingbox.common.judge": {"Judge": Judge, "JudgeException": JudgeException, "safe_tag_encode": safe_tag_encode},
}


def _submodules(name: str) -> list[str]:
    return [m.rpartition(".")[2] for m in MODULES if m.rpartition(".")[0] == name]


class _ShimFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads the modules in `MODULES`; knows nothing else (other finders are asked)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        # a package gets an empty __path__: its submodules come from this finder, never from disk
        return importlib.machinery.ModuleSpec(fullname, self, origin="trainer.env.grading.tb_shim",
                                              is_package=bool(_submodules(fullname)))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        names = MODULES[module.__name__]
        module.__dict__.update(names)
        module.__all__ = sorted(names)


_FINDER = _ShimFinder()


def active() -> bool:
    """Whether `thinkingbox.*` imports resolve to the shim in this process."""
    return _FINDER in sys.meta_path


def install() -> None:
    """Put the shim first on `sys.meta_path`, unless it is there or the real package is."""
    if active() or "thinkingbox" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec("thinkingbox")
    except (ImportError, ValueError):
        spec = None
    # a bare `thinkingbox/` folder on sys.path (a namespace package: no origin) is not the framework
    if spec is not None and spec.origin is not None:
        return
    sys.meta_path.insert(0, _FINDER)


install_thinkingbox_shim = install  # the name the loaders and graders call it by


_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)'")


def import_error_message(e: ImportError) -> str:
    """What a failed import lacked, for a `TaskFormatError`; for a `thinkingbox.*` import while
    the shim stands in for the package, also what the shim provides there."""
    module = e.name or ""
    shim = active() and module.partition(".")[0] == "thinkingbox"
    if isinstance(e, ModuleNotFoundError):
        msg = f"import failed: no module named {module!r}"
        offer = f"the thinkingbox shim provides the modules {', '.join(m for m in MODULES if '.' in m)}"
    else:
        missing = getattr(e, "name_from", None) or next(iter(_CANNOT_IMPORT.findall(str(e))), None)
        if missing is None:
            return f"import failed: {e}"
        msg = f"import failed: cannot import name {missing!r} from {module!r}"
        offer = (f"the thinkingbox shim's {module} provides "
                 f"{', '.join(sorted([*MODULES.get(module, {}), *_submodules(module)]))}")
    return f"{msg} ({offer}; install the thinkingbox package for the rest)" if shim else msg


__all__ = ["MODULES", "SessionClientFixture", "active", "import_error_message", "install", "install_thinkingbox_shim", "safe_tag_encode"]
