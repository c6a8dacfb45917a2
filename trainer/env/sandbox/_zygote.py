"""The template process of a `start: fork` server (see trainer/env/sandbox/forkserver.py). Stdlib only: it
runs under the server's own interpreter (`{python}`), which may not have this project installed.

    PYTHON _zygote.py SCRIPT.py ARGS...      # as `PYTHON SCRIPT.py ARGS...` would run
    PYTHON _zygote.py -m PKG.MOD ARGS...     # as `PYTHON -m PKG.MOD ARGS...` would run

The control socket (a SOCK_SEQPACKET end) is the fd named by `TBT_ZYGOTE_FD`; `TBT_ZYGOTE_PRELOAD`
(comma-separated) names more modules to import (what the server imports lazily as it runs); both
are removed from the environment before anything else runs. The template imports what the server's source imports at
its top level (its `import` / `from ... import` statements, also those nested in top-level `if` and
`try` blocks; relative imports resolved against the package), never the server module itself, then
reports `{"ready": ...}` or `{"refused": reason}` (a thread alive after the imports: forking it is
unsafe) and waits. Each request carries three fds (stdin, stdout, stderr of one session): the
template forks a child that makes them its fds 0-2, dies with the template (PR_SET_PDEATHSIG), leads
its own session (so a kill reaches its tree), and runs the server's entry as `__main__`; the reply
is `{"pid": N}`. The template reaps its children and exits when the host closes the socket.
"""

from __future__ import annotations  # the server's interpreter may be older than ours

import ast
import atexit
import ctypes
import gc
import importlib
import importlib.util
import io
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import time
import traceback

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the template's socket watch still applies
        pass


def _imports(source: str, filename: str, package: str | None) -> list[str]:
    """Module names the source imports at its top level (candidates: some may not exist)."""
    names: list[str] = []

    def visit(body: list) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                names.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    if not package:
                        continue
                    try:
                        base = importlib.util.resolve_name("." * node.level + base, package)
                    except ImportError:
                        continue
                if base:
                    names.append(base)
                    names.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(ast.parse(source, filename).body)
    return names


def _preload(argv: list[str], extra: list[str]) -> tuple[dict, int]:
    """Set sys.path as the interpreter would for `argv`, import the server's imports; returns
    (the entry, the number of modules imported)."""
    before = len(sys.modules)
    if argv[0] == "-m":
        name, args = argv[1], argv[2:]
        sys.path[0] = os.getcwd()
        spec = importlib.util.find_spec(name)  # imports the parent packages, as `-m` does
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise ImportError(f"no Python source for module {name!r}")
        with open(spec.origin, encoding="utf-8") as f:
            source = f.read()
        package, origin = name.rpartition(".")[0] or None, spec.origin
        entry = {"module": name, "argv": [origin, *args]}
    else:
        script, args = argv[0], argv[1:]
        sys.path[0] = os.path.dirname(os.path.realpath(script))
        with open(script, encoding="utf-8") as f:
            source = f.read()
        package, origin = None, script
        entry = {"script": script, "argv": [script, *args]}
    for mod in _imports(source, origin, package) + extra:
        try:
            importlib.import_module(mod)
        except ImportError:
            pass  # a `from m import name` candidate, or a missing optional dependency: the child decides
        except Exception:  # a dependency failing at import: the server will fail the same way itself
            pass
    return entry, len(sys.modules) - before


def _threads() -> str | None:
    """Why forking now is unsafe (threads other than this one), or None."""
    live = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        tasks = 1
    if live or tasks > 1:
        return (f"a thread is running after the server's imports ({tasks} OS thread(s); Python threads: "
                f"{', '.join(live) or 'none'}): forking it is unsafe")
    return None


def _fresh_stdio() -> None:
    """sys.stdin/stdout/stderr over the new fds 0-2, as the interpreter makes them at start (the
    template's were opened on /dev/null: seekable, which a pipe is not)."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, name)
        raw = io.open(fd, "rb" if fd == 0 else "wb", buffering=-1, closefd=False)
        new = io.TextIOWrapper(raw, encoding=old.encoding, errors=old.errors, newline="\n",
                               line_buffering=fd == 2 or os.isatty(fd), write_through=fd == 2)
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)


def _child(entry: dict, fds: list[int], closing: list[int]) -> None:
    """In the forked child: become the session's server process; never returns."""
    code = 0
    try:
        os.setsid()
        _die_with_parent()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) | set(closing):
            if fd > 2:
                os.close(fd)
        _fresh_stdio()
        sys.argv = list(entry["argv"])
        if "module" in entry:
            runpy.run_module(entry["module"], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(entry["script"], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:  # the interpreter's own shutdown: join threads, atexit, flush
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main() -> None:
    ctl = socket.socket(fileno=int(os.environ.pop("TBT_ZYGOTE_FD")))
    extra = [m for m in os.environ.pop("TBT_ZYGOTE_PRELOAD", "").split(",") if m]
    t0 = time.perf_counter()
    try:
        entry, modules = _preload(sys.argv[1:], extra)
    except BaseException as e:
        ctl.send(json.dumps({"refused": f"cannot read the server's imports: {type(e).__name__}: {e}"}).encode())
        return
    why = _threads()
    if why is not None:
        ctl.send(json.dumps({"refused": why}).encode())
        return
    gc.collect()
    gc.freeze()  # keep the imported objects' pages shared with the children
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    ctl.send(json.dumps({"ready": True, "modules": modules, "preload_s": time.perf_counter() - t0,
                         "pid": os.getpid()}).encode())
    while True:
        ready, _, _ = select.select([ctl, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
        if ctl in ready:
            try:
                msg, fds, _, _ = socket.recv_fds(ctl, 4096, 3)
            except OSError:
                return
            if not msg:
                return  # the host is gone: the children die with us (PR_SET_PDEATHSIG)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(entry, fds, [ctl.fileno(), wake_r, wake_w])
            for fd in fds:
                os.close(fd)
            ctl.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    main()
