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

Each becomes `[redacted]`. The sinks call `redact`: `RecordWriter` (every JSON line), the HTTP
client's errors, and the `tbt` command line wraps its stdout and stderr (`RedactingStream`), so
rich output, typer's messages and log handlers writing there are covered. The replacement text
holds no JSON special character, so a redacted JSON line stays valid JSON.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Iterable, Mapping, TextIO

MARK = "[redacted]"
MIN_ENV_VALUE = 8  # shorter environment values are not taken for secrets ("1", "true", ...)

_SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(?:$|_)", re.I)
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)"
                     r"([^\w\[]{0,3}[:=][^\w\[]{0,4}(?:(?:bearer|basic|token)\s+)?)"
                     r"(?!(?:bearer|basic|token)\b)([^\s\"'\\,;}\[\]]{4,})")
# a bare Bearer credential: 8+ token characters, one of them a digit or a symbol ("bearer bonds" stays)
_SCHEME = re.compile(r"(?i)\b(bearer)(\s+)(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}")
_USERINFO = re.compile(r"(?<=://)[^/@\s\"'\\]+@")

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None
_env_read = False


def register(value: str | None) -> None:
    """Treat `value` as a secret from now on (None, empty or under 4 characters: ignored)."""
    global _pattern
    if not isinstance(value, str) or len(value) < 4:
        return
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    with _lock:
        if forms <= _values:
            return
        _values.update(forms)
        _pattern = re.compile("|".join(re.escape(v) for v in sorted(_values, key=len, reverse=True)))


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    return bool(_SECRET_NAME.search(name))


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


def redact(text: str) -> str:
    """`text` with every secret the module docstring names replaced by `[redacted]`."""
    if not text:
        return text
    if not _env_read:
        register_environment()
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MARK, text)
    if "earer" in text or "EARER" in text:
        text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    if "uthorization" in text or "UTHORIZATION" in text or "pi-key" in text or "PI-KEY" in text or "pi-Key" in text:
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    if "@" in text:
        text = _USERINFO.sub(f"{MARK}@", text)
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
           "wrap_std_streams"]
