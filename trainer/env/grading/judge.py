"""The judge a test asks (the ThinkingBox framework's `Judge` API), and an LLM behind it.

`Judge` has the framework's methods and meanings (docs/sandbox.md, "The judge"):

    text_yesno(text, question) -> bool            a question about a text
    evaluate_bool(system, user) -> bool           the test's own system and user prompts
    yesno(question) -> bool                       a bare question
    compare_yesno(first, second, question) -> bool  a question about two texts
    no_repeat(first, second_list) -> bool         the first text repeats none of the others
    text_yesno_with_motivation(text, question) -> {"answer": bool, "motivation": str}
    drain_decisions() -> list                     the motivated decisions since the last drain
    _get_text_completion(messages) -> Text        the model's reply to chat messages

Every method is built on `_get_text_completion`, the one place that talks to a model: the base
class has none (asking it raises `JudgeUnavailable`, a system error), `ChatJudge` posts to an
OpenAI-compatible endpoint. As in the framework's judge, a text asked about is put between
`<message>` and `</message>` (two compared texts between `<first>`/`<second>`), then the question;
quoted texts are tag-encoded (`safe_tag_encode`) so they cannot close the prompt's tags; questions
are not. The request samples as the benchmark's judge config does: temperature 0, seed 42,
`max_completion_tokens` 128 (`JudgeConfig`; judge spec options `temperature=`, `seed=`,
`max_tokens=`). The prompts are ours.

Ours is stricter than the framework in one way: it fails closed. `read_verdict` is the only reader
of an answer, and it reads only an unambiguous one: the reply is one verdict word, "Yes" or "No"
(case, surrounding white space, quotes, markdown emphasis and a final `.`/`!` aside). "Yes, but
no", "No — it never said yes", a hedge, or both words are ambiguous: the question is asked once
more with a stricter instruction (`STRICTER`), and an answer still ambiguous raises
`JudgeAmbiguous`, which the grader turns into a failed check (a scored 0 explained as "judge answer
ambiguous", with the raw replies), never a system error: a policy must not be able to dodge a 0
by confusing the judge. So `no_repeat` needs a clear "no" to each comparison, and a motivated
answer is a JSON object whose "answer" is one verdict word.

No answer at all is the endpoint's fault, not the model's No: `ChatJudge` retries an HTTP 200
whose body is not a chat completion (not JSON, no `choices[0].message`) or whose first choice
carries no text (no `content`, null, or only whitespace: a reasoning model that spent its
`max_tokens` thinking answers that way) exactly as it retries a 5xx. An endpoint that gives no
answer after the retries (unreachable, 5xx, empty replies) raises `JudgeUnavailable`: a system
error, never a 0, never a 1. Waits double from `backoff_s`; a 429 or 5xx reply's `Retry-After`
(seconds or an HTTP date) is honoured, capped at `max_retry_after_s` (trainer/core/retry_after.py).
Every message the judge raises or logs is redacted where it is made (trainer/core/redact.py): the
judge's key, any registered secret, an Authorization header an endpoint echoes back.

Configuration (`JudgeConfig.from_env`): `TBT_JUDGE_URL` (base URL, e.g. http://host:8000/v1),
`TBT_JUDGE_MODEL`, and the key in `TBT_JUDGE_API_KEY` (or the variable named by `api_key_env`).
The key is only ever put in the Authorization header: it is not in `repr`, logs, errors or records.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from trainer.core.redact import redact
from trainer.core.retry_after import retry_after
from trainer.env.grading.chat_types import Message, Text, as_messages

log = logging.getLogger(__name__)

_ONE_WORD = "Answer with a single word: Yes or No."
YESNO_SYSTEM = f"You are a careful grader. Answer the question you are asked. {_ONE_WORD}"
TEXT_SYSTEM = ("You are a careful grader. You are shown a message between <message> and </message>, then a "
               f"question about it. {_ONE_WORD}")
COMPARE_SYSTEM = ("You are a careful grader. You are shown two texts, one between <first> and </first> and "
                  f"one between <second> and </second>, then a question about them. {_ONE_WORD}")
MOTIVATION_SYSTEM = ("You are a careful grader. You are shown a message between <message> and </message>, then "
                     "a question about it; when the message is a conversation, judge what the assistant said. "
                     'Reply with one JSON object and nothing else: {"motivation": "why, in one or two '
                     'sentences", "answer": "Yes" or "No"}')
REPEATS_QUESTION = "Does the first text repeat what the second text says?"
STRICTER = (" Your previous reply could not be read as a verdict. Reply with exactly one word, Yes or No, "
            "and nothing else.")
STRICTER_MOTIVATED = (" Your previous reply could not be read as a verdict. The \"answer\" must be exactly one "
                      "word: \"Yes\" or \"No\".")

# The methods that ask the model. They keep no state, so one judge may answer them for many tests
# at once; the rest (the decision log) belongs to the judge object a test holds.
ASKING_METHODS = ("text_yesno", "evaluate_bool", "yesno", "compare_yesno", "no_repeat", "_motivated",
                  "_get_text_completion")


class JudgeUnavailable(RuntimeError):
    """The judge could not answer (not configured, unreachable): a system error, not a verdict."""


def safe_tag_encode(text: str) -> str:
    """`<` and `>` as HTML entities, so quoted text cannot close a prompt's tags."""
    return text.replace("<", "&lt;").replace(">", "&gt;")




_VERDICT_NOISE = " \t\r\n\"'`*_.!"


def read_verdict(answer: str | None) -> bool | None:
    """True for an unambiguous yes, False for an unambiguous no, None for anything else (module
    docstring): the reply must be the one verdict word, give or take quotes, emphasis, white
    space and a final full stop."""
    word = (answer or "").strip(_VERDICT_NOISE).lower()
    return True if word == "yes" else False if word == "no" else None


class JudgeAmbiguous(Exception):
    """The judge's answer was not one verdict word, twice: the check fails (a scored 0)."""

    def __init__(self, question: str, replies: list[str]):
        self.question, self.replies = question, replies
        super().__init__(f"judge answer ambiguous (asked twice): {question[:200]!r}; replies "
                         + ", ".join(repr(r[:200]) for r in replies))


def parse_yesno(answer: str | None, expect: bool = True) -> bool:
    """Whether `answer` unambiguously says yes (`expect=True`) or no (`expect=False`); anything
    else is False either way, so an unreadable answer never passes, whichever way a test asks."""
    return read_verdict(answer) is expect


_KEY = re.compile(r"""(?<=[{,])(\s*)'?(answer|motivation)'?(\s*):""")


def parse_motivation(reply: str | None) -> dict[str, Any]:
    """`{"answer": bool | None, "motivation": str}` from a reply holding one JSON object (bare or
    single-quoted `answer`/`motivation` keys are accepted, as are text and code fences around it);
    `answer` None: no object, no string "answer", or one that is not a single verdict word."""
    text = reply or ""
    body = text[text.find("{"):text.rfind("}") + 1]
    obj = None
    for candidate in (body, _KEY.sub(r'\1"\2"\3:', body)) if body else ():
        try:
            obj = json.loads(candidate)
            break
        except json.JSONDecodeError:
            continue
    if not isinstance(obj, dict) or not isinstance(obj.get("answer"), str):
        return {"answer": None, "motivation": f"unreadable judge reply: {text[:200]!r}"}
    return {"answer": read_verdict(obj["answer"]), "motivation": str(obj.get("motivation") or "")}


def _quoted(question: str, **texts: str) -> str:
    """The user prompt: each text between its tags (tag-encoded), then the question."""
    return "".join(f"<{tag}>\n{safe_tag_encode(t)}\n</{tag}>\n" for tag, t in texts.items()) + question


class Judge:
    """The framework's judge API (module docstring), built on `_get_text_completion`.

    The base class has no model: asking it is an infrastructure fault, never a pass. A subclass
    gives it one by overriding `_get_text_completion`; a scripted test judge may instead override
    the asking methods it answers (`ASKING_METHODS`; `_motivated` for a motivated answer, since
    the decision log stays with the judge a test holds). `evaluates = False` marks a stand-in
    that asks nobody (golden replay): the grader then records its questions as not evaluated.
    """

    evaluates = True

    def _get_text_completion(self, messages: list[Message]) -> Text:
        raise JudgeUnavailable("no judge is configured, but this test asks one")

    def text_yesno(self, text: str, question: str) -> bool:
        return self._verdict(TEXT_SYSTEM, _quoted(question, message=text), question)

    def evaluate_bool(self, system: str, user: str) -> bool:
        return self._verdict(system, user, user)

    def yesno(self, question: str) -> bool:
        return self._verdict(YESNO_SYSTEM, question, question)

    def compare_yesno(self, first: str, second: str, question: str) -> bool:
        return self._verdict(COMPARE_SYSTEM, _quoted(question, first=first, second=second), question)

    def no_repeat(self, first: str, second_list: list[str]) -> bool:
        # each comparison must be a clear no: an ambiguous answer raises, it is not "does not repeat"
        return not any(self._verdict(COMPARE_SYSTEM, _quoted(REPEATS_QUESTION, first=first, second=s), REPEATS_QUESTION)
                       for s in second_list)

    def text_yesno_with_motivation(self, text: str, question: str) -> dict[str, Any]:
        decision = self._motivated(text, question)
        self._log().append({"question": question, **decision})
        return decision

    def drain_decisions(self) -> list[dict[str, Any]]:
        """The `{question, answer, motivation}` of each motivated decision since the last drain."""
        out = self._log()
        self.__dict__["_decisions"] = []
        return out

    def _motivated(self, text: str, question: str) -> dict[str, Any]:
        user = _quoted(question, message=text)
        replies = [self._reply(MOTIVATION_SYSTEM, user)]
        decision = parse_motivation(replies[0])
        if decision["answer"] is None:
            replies.append(self._reply(MOTIVATION_SYSTEM + STRICTER_MOTIVATED, user))
            decision = parse_motivation(replies[1])
        if decision["answer"] is None:
            raise JudgeAmbiguous(question, replies)
        return decision

    def _verdict(self, system: str, user: str, question: str) -> bool:
        """One yes/no question: asked, and once more with `STRICTER` when the reply is ambiguous."""
        replies = [self._reply(system, user)]
        verdict = read_verdict(replies[0])
        if verdict is None:
            replies.append(self._reply(system + STRICTER, user))
            verdict = read_verdict(replies[1])
        if verdict is None:
            raise JudgeAmbiguous(question, replies)
        return verdict

    def _reply(self, system: str, user: str) -> str:
        return self._get_text_completion([Text(role="system", content=system),
                                          Text(role="user", content=user)]).content

    def _log(self) -> list[dict[str, Any]]:
        # made on first use: subclasses need not call an __init__ of ours
        return self.__dict__.setdefault("_decisions", [])


@dataclass
class JudgeConfig:
    """Where the judge lives. Every field is documented where declared."""

    url: str  # base URL of an OpenAI-compatible API (the part before /chat/completions)
    model: str  # model name sent in the request
    api_key: str | None = field(default=None, repr=False)  # never printed; None: no header
    timeout_s: float = 60.0  # per HTTP attempt
    retries: int = 3  # extra attempts after the first, on connection errors, 429, 5xx and empty replies
    backoff_s: float = 1.0  # first wait between attempts; doubles each time
    max_retry_after_s: float = 60.0  # the longest wait a 429/5xx reply's Retry-After header gets
    max_tokens: int = 128  # max_completion_tokens (the benchmark's judge config); a motivation's JSON fits
    temperature: float = 0.0
    seed: int | None = 42  # the benchmark's judge config; None: not sent

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, api_key_env: str = "TBT_JUDGE_API_KEY") -> JudgeConfig | None:
        """From `TBT_JUDGE_URL` / `TBT_JUDGE_MODEL` / the key variable; None when no URL is set."""
        env = dict(os.environ if env is None else env)
        if not env.get("TBT_JUDGE_URL"):
            return None
        return cls(url=env["TBT_JUDGE_URL"], model=env.get("TBT_JUDGE_MODEL", "default"),
                   api_key=env.get(api_key_env) or None)


class ChatJudge(Judge):
    """`Judge` backed by `POST {url}/chat/completions`. Thread-safe and shareable: the methods
    that ask keep no state; one HTTP client per judge."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._http = httpx.Client(base_url=config.url.rstrip("/"), headers=headers, timeout=config.timeout_s)

    def __repr__(self) -> str:
        return f"ChatJudge(url={self._where()!r}, model={self.config.model!r})"

    def close(self) -> None:
        self._http.close()

    def request(self, messages: list[Message]) -> dict[str, Any]:
        """The body of one judge POST: the framework's judge request (module docstring)."""
        body: dict[str, Any] = {"model": self.config.model, "temperature": self.config.temperature,
                                "max_completion_tokens": self.config.max_tokens,
                                "messages": [_wire(m) for m in as_messages(list(messages))]}
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        return body

    def _get_text_completion(self, messages: list[Message]) -> Text:
        """The model's reply to `messages` (`Text`s, or chat dicts), never empty. Retries as the
        module docstring says (an empty reply too), then raises `JudgeUnavailable`."""
        body = self.request(messages)
        wait, last, what, asked = self.config.backoff_s, "", "unreachable", None
        for attempt in range(self.config.retries + 1):
            if attempt:
                time.sleep(max(wait, asked or 0.0))
                wait *= 2
            what, asked = "unreachable", None
            try:
                r = self._http.post("/chat/completions", json=body)
            except httpx.HTTPError as e:
                last = self._redact(f"{type(e).__name__}: {e}")
                log.warning("judge attempt %d failed: %s", attempt + 1, last)
                continue
            if r.status_code == 429 or r.status_code >= 500:
                asked = retry_after(r, self.config.max_retry_after_s)
                last = f"HTTP {r.status_code}" + (f", Retry-After {asked:g} s" if asked is not None else "")
                log.warning("judge attempt %d failed: %s", attempt + 1, last)
                continue
            if r.status_code >= 400:  # auth, bad model: retrying will not help
                raise JudgeUnavailable(self._redact(f"judge answered HTTP {r.status_code}: {r.text[:200]}"))
            content, (fault, cause) = _content(r)
            if content is None:  # no answer: the endpoint's fault, retried (module docstring)
                what, last = fault, self._redact(cause)
                log.warning("judge attempt %d failed: %s", attempt + 1, last)
                continue
            return Text(role="assistant", content=content)
        raise JudgeUnavailable(self._redact(f"judge {what} after {self.config.retries + 1} attempts ({last}) "
                                            f"at {self._where()}"))

    def _where(self) -> str:
        """The URL without user info or query: either may hold a credential."""
        return str(httpx.URL(self.config.url).copy_with(username=None, password=None, query=None))

    def _redact(self, text: str) -> str:
        """`text` without the judge's key, any registered secret or an echoed auth header
        (trainer/core/redact.py), at the source: a judge error reaches records and logs."""
        return redact(text, values=(self.config.api_key,))


def _wire(m: Message) -> dict[str, str]:
    if not isinstance(m, Text):
        raise TypeError(f"the judge completes text messages only, not {type(m).__name__}")
    return {"role": m.role, "content": m.content}


def _content(r: httpx.Response) -> tuple[str | None, tuple[str, str]]:
    """(the first choice's message text, _) or, when the reply carries no text, (None, (what the
    judge did, the cause))."""
    try:
        choice: Any = r.json()["choices"][0]
        content = choice["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None, ("returned replies that are not chat completions", f"body {r.text[:120]!r}")
    if isinstance(content, str) and content.strip():
        return content, ("", "")
    return None, ("returned empty replies",
                  f"content {content!r:.60}, finish_reason {choice.get('finish_reason')!r:.20}")


def judge_from_env() -> Judge:
    """A `ChatJudge` when `TBT_JUDGE_URL` is set, else the base `Judge` (asking it is a system error)."""
    cfg = JudgeConfig.from_env()
    return ChatJudge(cfg) if cfg else Judge()


__all__ = ["ASKING_METHODS", "ChatJudge", "Judge", "JudgeConfig", "JudgeUnavailable", "judge_from_env",
           "JudgeAmbiguous", "parse_motivation", "parse_yesno", "read_verdict", "safe_tag_encode"]
