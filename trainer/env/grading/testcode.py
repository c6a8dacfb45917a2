"""Running a test file's code: the module executed once (with the `thinkingbox` shim installed),
the function a YAML `test_code` defines, and the line of a file where its code failed. Used by the
task loader (`tasks.Task.test_fn`) and by the grader's isolated child, so both read a file alike."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, Callable

from trainer.env.errors import TaskFormatError
from trainer.env.grading.tb_shim import import_error_message, install_thinkingbox_shim

TEST_FN_NAME = "__tb_test_fn"  # the function a YAML test file's `test_code` is wrapped in


class CompiledFile:
    """A test file's module namespace, executed once on first use."""

    def __init__(self, path: Path):
        self.path = path
        self._ns: dict[str, Any] | None = None

    def namespace(self) -> dict[str, Any]:
        if self._ns is None:
            install_thinkingbox_shim()
            self._ns = exec_source(self.path.read_text(encoding="utf-8"), self.path,
                                    f"tb_tests.{self.path.stem}")
        return self._ns


def exec_source(source: str, path: Path, module_name: str) -> dict[str, Any]:
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    try:
        code = compile(source, str(path), "exec")
        exec(code, module.__dict__)
    except SyntaxError as e:
        raise TaskFormatError(path, f"Python syntax error: {e.msg}", line=e.lineno) from None
    except ImportError as e:  # say which module or name is missing: the file may need more than we offer
        raise TaskFormatError(path, import_error_message(e), line=failure_line(e.__traceback__, str(path))) from None
    except Exception as e:  # the file's own module-level code failed
        raise TaskFormatError(path, f"executing the file failed: {type(e).__name__}: {e}",
                              line=failure_line(e.__traceback__, str(path))) from None
    return module.__dict__


def failure_line(tb: Any, filename: str) -> int | None:
    """The last line of `filename` in a traceback (where a test or a file's code failed)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def resolve_test_code(ns: dict[str, Any], file: Path, name: str, lineno: int | None) -> Callable:
    """The test function a YAML test file's `test_code` defines: `__tb_test_fn`, else the only
    function defined there (imported helpers do not count)."""
    fn = ns.get(TEST_FN_NAME)
    if fn is None:
        fns = [v for v in ns.values() if isinstance(v, types.FunctionType) and v.__code__.co_filename == str(file)]
        fn = fns[0] if len(fns) == 1 else None
    if not callable(fn):
        raise TaskFormatError(file, f"test_code of {name!r} must define {TEST_FN_NAME} or exactly one function",
                              line=lineno, key="test_code")
    return fn


__all__ = ["CompiledFile", "exec_source", "failure_line", "resolve_test_code"]
