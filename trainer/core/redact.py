"""One redaction path for every message that leaves the process: records, error files, logs,
stderr and stdout, the launch's DRY_RUN print.

What is removed, whatever an endpoint echoes back or an exception quotes:
- every registered secret value (`register`): the API keys of the policy, user and judge endpoints
  (each `Endpoint` registers its own; `make_judge` registers the judge's), as written and in its
  JSON-escaped form;
- the values of environment variables whose name says they hold one (a `KEY`, `API_KEY`, `TOKEN`,
  `SECRET`, `PASSWORD`, `PASSWD` or `CREDENTIAL(S)` segment, e.g. `TBT_POLICY_API_KEY`,
  `HF_TOKEN`; values of 8 characters or more), read on first use and by `register_environment`;
- an `Authorization` / `Proxy-Authorization` / `X-Api-Key` / `Api-Key` header's value (after its
  `Bearer`/`Basic`/`Token` word), and any `Bearer` credential (8 token characters or more, one of
  them a digit or a symbol), registered or not;
- the user info of a URL (`https://user:password@host` -> `https://[redacted]@host`).

One call may name more (`redact(text, env, values=..., urls=True)`), without registering them:
- `values`: secrets of the caller's own (an endpoint's or the judge's key, any length);
- `env`: a mapping (the launch's environment and its config's `env:`) whose secret-named variables'
  values (4 characters or more) go too, names read loosely (`secret_name(name, loose=True)`: the
  word anywhere in the name, `MY_APIKEYS`, `GITHUB_TOKENS`);
- `urls`: the query of every http(s) URL, and user info holding quotes: for plain text only (the
  launch's lines), as the query's pattern would take a JSON line's closing quote with it.

Each becomes `[redacted]`. The sinks call `redact`: `RecordWriter` (every JSON line), the HTTP
client's errors (`Endpoint.scrub`), the judge's, the launch's every line (trainer/verl/launch.py,
with its environment and `urls=True`), and the `tbt` command line wraps its stdout and stderr
(`RedactingStream`), so rich output, typer's messages and log handlers writing there are covered.
The replacement text holds no JSON special character, so a redacted JSON line stays valid JSON.

`without_secrets(env)`: `env` less its secret-named variables (loosely), the environment of a
child that never needs a credential (the grader's test subprocess).
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Iterable, Mapping, TextIO

MARK = "[redacted]"
MIN_ENV_VALUE = 8  # shorter environment values are not taken for secrets ("1", "true", ...)
MIN_VALUE = 4  # shorter values are never taken for secrets (an `env` given to one call: from 4 on)

_SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(?:$|_)", re.I)
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)"
                     r"([^\w\[]{0,3}[:=][^\w\[]{0,4}(?:(?:bearer|basic|token)\s+)?)"
                     r"(?!(?:bearer|basic|token)\b)([^\s\"'\\,;}\[\]]{4,})")
# a bare Bearer credential: 8+ token characters, one of them a digit or a symbol ("bearer bonds" stays)
_SCHEME = re.compile(r"(?i)\b(bearer)(\s+)(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}")
_USERINFO = re.compile(r"(?<=://)[^/@\s\"'\\]+@")
# a secret's word anywhere in a variable's name (`loose`): every name `_SECRET_NAME` takes, and more
_SECRET_WORD = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
# plain text only (`urls=True`): user info with quotes in it, and a URL's query
_USERINFO_TEXT = re.compile(r"(?<=://)[^/@\s#]+@")
_QUERY = re.compile(r"(https?://[^\s?#]+)\?[^\s#]*")

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None
_env_read = False


def _forms(value: str) -> set[str]:
    """`value` as written and JSON-escaped (both ways of writing non-ASCII)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}


def register(value: str | None) -> None:
    """Treat `value` as a secret from now on (None, empty or under 4 characters: ignored)."""
    global _pattern
    if not isinstance(value, str) or len(value) < MIN_VALUE:
        return
    forms = _forms(value)
    with _lock:
        if forms <= _values:
            return
        _values.update(forms)
        _pattern = re.compile("|".join(re.escape(v) for v in sorted(_values, key=len, reverse=True)))


def secret_name(name: str, loose: bool = False) -> bool:
    """Whether an environment variable's name says it holds a secret: a `KEY`, `API_KEY`, `TOKEN`,
    `SECRET`, `PASSWORD`, `PASSWD` or `CREDENTIAL(S)` segment (what the process environment is
    read for: a value taken for a secret is redacted everywhere, for the process's life); `loose`:
    one of those words anywhere in the name (`MONKEY_PATH`, `TOKENIZERS_PARALLELISM` too), where
    taking one too many costs nothing: one call's `env`, the variables a child is not given."""
    return bool((_SECRET_WORD if loose else _SECRET_NAME).search(name))


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less every variable whose name (read loosely) says it holds a secret."""
    return {k: v for k, v in env.items() if not secret_name(k, loose=True)}


def register_environment(env: Mapping[str, str] | None = None) -> None:
    """Register the values of `env`'s (default: the process environment's) secret-named variables."""
    global _env_read
    for name, value in (os.environ if env is None else env).items():
        if value and len(value) >= MIN_ENV_VALUE and secret_name(name):
            register(value)
    if env is None:
        _env_read = True


def register_all(values: Iterable[str | None]) -> None:
    for v in values:
        register(v)


def redact(text: str, env: Mapping[str, str] | None = None, *, values: Iterable[str | None] = (),
           urls: bool = False) -> str:
    """`text` with every secret the module docstring names replaced by `[redacted]`: the registered
    ones and, for this call only, `values`, the values of `env`'s secret-named variables and, with
    `urls`, every URL's query (plain text only)."""
    if not text:
        return text
    if not _env_read:
        register_environment()
    extra = {f for v in values if isinstance(v, str) and v for f in _forms(v)}
    if env:
        extra.update(f for name, v in env.items()
                     if isinstance(v, str) and len(v) >= MIN_VALUE and secret_name(name, loose=True) for f in _forms(v))
    for v in sorted(extra, key=len, reverse=True):  # the longest first: a secret holding another goes whole
        text = text.replace(v, MARK)
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MARK, text)
    if "earer" in text or "EARER" in text:
        text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    if "uthorization" in text or "UTHORIZATION" in text or "pi-key" in text or "PI-KEY" in text or "pi-Key" in text:
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    if "@" in text:
        text = _USERINFO.sub(f"{MARK}@", text)
    if urls:
        text = _QUERY.sub(rf"\1?{MARK}", _USERINFO_TEXT.sub(f"{MARK}@", text))
    return text


class RedactingStream:
    """A text stream that redacts what is written to it (and writes lone surrogates, which no
    encoding takes, as U+FFFD), delegating everything else to the stream it wraps."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, s: str) -> int:
        out = redact(s)
        try:
            self._stream.write(out)
        except UnicodeEncodeError:
            enc = getattr(self._stream, "encoding", None) or "utf-8"
            self._stream.write(out.encode(enc, "replace").decode(enc, "replace"))
        return len(s)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def wrap_std_streams() -> None:
    """Make `sys.stdout` and `sys.stderr` redacting (idempotent)."""
    import sys

    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)  # type: ignore[assignment]


__all__ = ["MARK", "RedactingStream", "redact", "register", "register_all", "register_environment", "secret_name",
           "without_secrets", "wrap_std_streams"]
