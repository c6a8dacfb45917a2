"""An LLM judge on any OpenAI-compatible chat endpoint, failing closed.

`ChatJudge.text_yesno(text, question)` asks the model to answer yes or no. Parsing follows the
reference (strip `.,;:` and newlines, lower-case; yes when the first or last word is "yes"), and
everything else is No: an empty, malformed or rambling answer is never a pass. Connection errors,
timeouts, HTTP 429 and 5xx are retried with exponential backoff; when the retries run out the
judge raises `JudgeUnavailable`, which the grader turns into a system error (never a 0, never a 1).

Configuration (`JudgeConfig.from_env`): `TBT_JUDGE_URL` (base URL, e.g. http://host:8000/v1),
`TBT_JUDGE_MODEL`, and the key in `TBT_JUDGE_API_KEY` (or the variable named by `api_key_env`).
The key is only ever put in the Authorization header: it is not in `repr`, logs or records.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from trainer.env.context import Judge, JudgeUnavailable

log = logging.getLogger(__name__)

SYSTEM_PROMPT = ("You are a strict grader. Read the text, then answer the question about it with a "
                 "single word: yes or no.")
_STRIP = ".,;:!\n\r\t \"'*`"


def parse_yesno(answer: str | None) -> bool:
    """True only when the first or last word is "yes" (fail closed: anything else is No)."""
    words = [w.strip(_STRIP).lower() for w in (answer or "").split()]
    words = [w for w in words if w]
    return bool(words) and (words[0] == "yes" or words[-1] == "yes")


@dataclass
class JudgeConfig:
    """Where the judge lives. Every field is documented where declared."""

    url: str  # base URL of an OpenAI-compatible API (the part before /chat/completions)
    model: str  # model name sent in the request
    api_key: str | None = field(default=None, repr=False)  # never printed; None: no header
    timeout_s: float = 60.0  # per HTTP attempt
    retries: int = 3  # extra attempts after the first, on connection errors, 429 and 5xx
    backoff_s: float = 1.0  # first wait between attempts; doubles each time
    max_tokens: int = 16  # a yes/no needs few tokens (reasoning models may need more)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, api_key_env: str = "TBT_JUDGE_API_KEY") -> JudgeConfig | None:
        """From `TBT_JUDGE_URL` / `TBT_JUDGE_MODEL` / the key variable; None when no URL is set."""
        env = dict(os.environ if env is None else env)
        if not env.get("TBT_JUDGE_URL"):
            return None
        return cls(url=env["TBT_JUDGE_URL"], model=env.get("TBT_JUDGE_MODEL", "default"),
                   api_key=env.get(api_key_env) or None)


class ChatJudge(Judge):
    """`Judge` backed by `POST {url}/chat/completions`. Thread-safe; one HTTP client per judge."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._http = httpx.Client(base_url=config.url.rstrip("/"), headers=headers, timeout=config.timeout_s)

    def __repr__(self) -> str:
        return f"ChatJudge(url={self.config.url!r}, model={self.config.model!r})"

    def close(self) -> None:
        self._http.close()

    def ask(self, text: str, question: str) -> str:
        """The model's raw answer text ("" when the reply carries none). Raises `JudgeUnavailable`."""
        body = {"model": self.config.model, "temperature": 0, "max_tokens": self.config.max_tokens,
                "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                             {"role": "user", "content": f"TEXT:\n{text}\n\nQUESTION: {question}\n"
                                                         "Answer yes or no."}]}
        wait, last = self.config.backoff_s, ""
        for attempt in range(self.config.retries + 1):
            if attempt:
                time.sleep(wait)
                wait *= 2
            try:
                r = self._http.post("/chat/completions", json=body)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
                log.warning("judge attempt %d failed: %s", attempt + 1, last)
                continue
            if r.status_code == 429 or r.status_code >= 500:
                last = f"HTTP {r.status_code}"
                log.warning("judge attempt %d failed: %s", attempt + 1, last)
                continue
            if r.status_code >= 400:  # auth, bad model: retrying will not help
                raise JudgeUnavailable(f"judge answered HTTP {r.status_code}: {r.text[:200]}")
            return _content(r)
        raise JudgeUnavailable(f"judge unreachable after {self.config.retries + 1} attempts ({last}) "
                               f"at {self.config.url}")

    def text_yesno(self, text: str, question: str) -> bool:
        return parse_yesno(self.ask(text, question))


def _content(r: httpx.Response) -> str:
    """The first choice's message text; "" for any malformed body (which then reads as No)."""
    try:
        msg: Any = r.json()["choices"][0]["message"]
        content = msg.get("content")
        return content if isinstance(content, str) else ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return ""


def judge_from_env() -> Judge:
    """A `ChatJudge` when `TBT_JUDGE_URL` is set, else the base `Judge` (asking it is a system error)."""
    cfg = JudgeConfig.from_env()
    return ChatJudge(cfg) if cfg else Judge()


__all__ = ["ChatJudge", "JudgeConfig", "SYSTEM_PROMPT", "judge_from_env", "parse_yesno"]
