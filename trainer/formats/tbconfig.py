"""The ThinkingBox framework's config file (`tb infer --config config.yaml`) read as a run's
policy, user and judge: `tbt run --config FILE` / `tbt eval --config FILE` (docs/evaluation.md).

What is read:

    orchestrator:            type: thinkingbox; agent_model: a model block   -> the policy
      agent_model            (a top-level `agent_model`, the framework's deprecated place, is
                             read when there is no orchestrator block)
    user_model               a model block (optional)                       -> the simulated user
    judge_model              a model block                                  -> the judge
    judge_type               legacy (the framework's default); motivation is refused
    user_can_end_conversation  false; true is refused (our user cannot end the conversation)
    mcp_proxy                noted and not used: our sandbox runs the servers itself

A model block (`type: aoai`, an OpenAI-compatible chat completions endpoint):

    endpoint_url             .../chat/completions (the base before it is the spec's URL)
    deployment               the model name sent
    temperature, top_k, top_p, max_completion_tokens, timeout, seed
    max_retries_server_error the spec's retries
    is_reasoning             agent model: reasoning on (`RunSpec.thinking`)
    credential               {type: api-key, api_key: KEY}; KEY may be `${VAR}` or `$VAR`, read
                             from the environment; a literal key is put in this process's
                             environment under TBT_CONFIG_<ROLE>_KEY and the spec names that
                             variable (keys never appear in specs, identities or records)

The framework's other model keys (account_name, api_version, reasoning_effort, disabled_params,
parallel_tool_calls, client_certificate, trust_ca_path, headers, use_dns_cache,
retryable_server_errors) are accepted and listed in `notes` as not used. Any other key is an error
naming the file, line and key; so is a model type other than aoai, a block that is not a mapping,
or a value of the wrong type.

Sampling: a value the file gives wins; one it leaves out takes the framework's default for that
block (temperature 1.0, max_completion_tokens 4096; no top_p or top_k sent: top_p 1.0, top_k off;
the agent's seed is the episode's, as ours always is, and a fixed `seed` of the agent model is
noted and not used, since it would make every repetition of a task the same sample).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, MutableMapping

import yaml

from trainer.core import redact


class TBConfigError(ValueError):
    """A config file that cannot be used: names the file, line and key."""


USED = ("type", "deployment", "endpoint_url", "temperature", "top_k", "top_p", "max_completion_tokens", "timeout",
        "seed", "max_retries_server_error", "is_reasoning", "credential")
NOT_USED = ("account_name", "api_version", "reasoning_effort", "disabled_params", "parallel_tool_calls",
            "client_certificate", "trust_ca_path", "headers", "use_dns_cache", "retryable_server_errors")
TOP = ("mcp_proxy", "orchestrator", "judge_model", "judge_type", "user_model", "user_can_end_conversation",
       "agent_model", "mcp_proxy_timeout", "mcp_proxy_use_dns_cache")
DEFAULT_TEMPERATURE = 1.0  # the framework's aoai defaults
DEFAULT_MAX_COMPLETION_TOKENS = 4096
_ENV_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


@dataclass
class _Node:
    """A YAML mapping with the line of each key (1-based)."""

    value: dict[str, Any]
    lines: dict[str, int]
    line: int


def _plain(node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        value, lines = {}, {}
        for k, v in node.value:
            key = str(yaml.safe_load(yaml.serialize(k)))
            value[key] = _plain(v)
            lines[key] = k.start_mark.line + 1
        return _Node(value, lines, node.start_mark.line + 1)
    if isinstance(node, yaml.SequenceNode):
        return [_plain(x) for x in node.value]
    return yaml.safe_load(yaml.serialize(node))


def _unwrap(x: Any) -> Any:
    if isinstance(x, _Node):
        return {k: _unwrap(v) for k, v in x.value.items()}
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    return x


@dataclass
class TBRunConfig:
    """What a framework config file gives a run: spec strings (trainer/rollout/setup.py) and notes."""

    policy: str
    user: str | None
    judge: str
    thinking: bool | None  # the agent model's is_reasoning, when given
    notes: list[str] = field(default_factory=list)


class _Reader:
    def __init__(self, path: Path, env: MutableMapping[str, str]):
        self.path, self.env, self.notes = path, env, []

    def err(self, line: int, where: str, msg: str) -> TBConfigError:
        return TBConfigError(f"{self.path}:{line}: {where}: {msg}")

    def mapping(self, node: Any, line: int, where: str) -> _Node:
        if not isinstance(node, _Node):
            raise self.err(line, where, f"expected a mapping, got {_unwrap(node)!r:.60}")
        return node

    def number(self, block: _Node, key: str, where: str, *, cast: type = float, ok=lambda v: True) -> Any:
        v = block.value.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (cast is int and not float(v).is_integer()):
            raise self.err(block.lines[key], f"{where}.{key}", f"expected a number, got {v!r:.60}")
        if not ok(v):
            raise self.err(block.lines[key], f"{where}.{key}", f"{v!r} is out of range")
        return cast(v)

    def model(self, node: Any, line: int, where: str, role: str) -> tuple[str, dict[str, Any]]:
        """(the URL#MODEL body, the spec options) of a model block."""
        block = self.mapping(node, line, where)
        unknown = [k for k in block.value if k not in USED and k not in NOT_USED]
        if unknown:
            k = unknown[0]
            raise self.err(block.lines[k], f"{where}.{k}", f"unknown key (known: {', '.join((*USED, *NOT_USED))})")
        kind = block.value.get("type")
        if kind != "aoai":
            at = block.lines.get("type", block.line)
            raise self.err(at, f"{where}.type", f"{kind!r} is not supported: only aoai (an OpenAI-compatible chat "
                                                 "completions endpoint) is")
        ignored = [k for k in block.value if k in NOT_USED]
        if ignored:
            self.notes.append(f"{where}: not used: {', '.join(ignored)}")
        url = block.value.get("endpoint_url")
        if not isinstance(url, str) or not url.strip():
            at = block.lines.get("endpoint_url", block.line)
            raise self.err(at, f"{where}.endpoint_url", "required: the endpoint's .../chat/completions URL (Azure "
                                                        "OpenAI's account_name form is not supported)")
        url = url.strip().rstrip("/")
        if not url.endswith("/chat/completions"):
            raise self.err(block.lines["endpoint_url"], f"{where}.endpoint_url",
                           "expected a URL ending in /chat/completions")
        deployment = block.value.get("deployment")
        if not isinstance(deployment, str) or not deployment:
            raise self.err(block.lines.get("deployment", block.line), f"{where}.deployment", "required: the model name")
        if any(c in deployment for c in ",#") or "," in url:
            raise self.err(block.lines["deployment"], where, "a deployment or URL with ',' or '#' cannot be a spec")
        opts: dict[str, Any] = {}
        t = self.number(block, "temperature", where, ok=lambda v: v >= 0)
        opts["temperature"] = DEFAULT_TEMPERATURE if t is None else t
        m = self.number(block, "max_completion_tokens", where, cast=int, ok=lambda v: v >= 1)
        opts["max_tokens"] = DEFAULT_MAX_COMPLETION_TOKENS if m is None else m
        for key, cast, ok in (("top_p", float, lambda v: 0 < v <= 1), ("top_k", int, lambda v: v >= 0),
                              ("timeout", float, lambda v: v > 0), ("seed", int, lambda v: True),
                              ("max_retries_server_error", int, lambda v: v >= 0)):
            v = self.number(block, key, where, cast=cast, ok=ok)
            if v is not None:
                opts["retries" if key == "max_retries_server_error" else key] = v
        reasoning = block.value.get("is_reasoning")
        if reasoning is not None and not isinstance(reasoning, bool):
            raise self.err(block.lines["is_reasoning"], f"{where}.is_reasoning", "expected true or false")
        opts["_reasoning"] = reasoning
        cred = block.value.get("credential")
        if cred is not None:
            opts["key_env"] = self.key_env(cred, block.lines["credential"], f"{where}.credential", role)
        return f"{url[:-len('/chat/completions')]}#{deployment}", opts

    def key_env(self, node: Any, line: int, where: str, role: str) -> str:
        cred = self.mapping(node, line, where)
        if cred.value.get("type") != "api-key":
            raise self.err(cred.lines.get("type", cred.line), f"{where}.type",
                           f"{cred.value.get('type')!r} is not supported: only api-key")
        extra = [k for k in cred.value if k not in ("type", "api_key")]
        if extra:
            raise self.err(cred.lines[extra[0]], f"{where}.{extra[0]}", "unknown key (known: type, api_key)")
        key = cred.value.get("api_key")
        if not isinstance(key, str) or not key:
            raise self.err(cred.lines.get("api_key", cred.line), f"{where}.api_key", "required: a key or ${VAR}")
        m = _ENV_REF.match(key.strip())
        if m:
            if not self.env.get(m.group(1)):
                raise self.err(cred.lines["api_key"], f"{where}.api_key", f"${m.group(1)} is not set")
            redact.register(self.env[m.group(1)])
            return m.group(1)
        var = f"TBT_CONFIG_{role.upper()}_KEY"
        self.env[var] = key
        redact.register(key)
        return var


def _spec(body: str, opts: Mapping[str, Any], keep: tuple[str, ...]) -> str:
    parts = [f"{k}={opts[k]}" for k in keep if k in opts]
    return f"openai:{body}" + ("," + ",".join(parts) if parts else "")


def read_tb_config(path: str | Path, env: MutableMapping[str, str] | None = None) -> TBRunConfig:
    """The policy, user and judge specs of a framework config file (module docstring)."""
    path = Path(path)
    env = os.environ if env is None else env
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TBConfigError(f"{path}: {e.strerror}") from None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError as e:
        raise TBConfigError(f"{path}: not YAML ({e})") from None
    r = _Reader(path, env)
    top = r.mapping(_plain(node) if node is not None else None, 1, "the file")
    unknown = [k for k in top.value if k not in TOP]
    if unknown:
        raise r.err(top.lines[unknown[0]], unknown[0], f"unknown key (known: {', '.join(TOP)})")
    judge_type = top.value.get("judge_type", "legacy")
    if judge_type != "legacy":
        raise r.err(top.lines["judge_type"], "judge_type", f"{judge_type!r} is not supported: only legacy (our judge "
                                                            "asks text_yesno as the legacy judge does)")
    if top.value.get("user_can_end_conversation", False) not in (False, None):
        raise r.err(top.lines["user_can_end_conversation"], "user_can_end_conversation",
                    "true is not supported: our simulated user cannot end the conversation")
    if "mcp_proxy" in top.value:
        r.notes.append("mcp_proxy: not used (the sandbox runs the task's servers itself)")
    if "orchestrator" in top.value:
        if "agent_model" in top.value:
            raise r.err(top.lines["agent_model"], "agent_model", "give orchestrator.agent_model or agent_model, not both")
        orch = r.mapping(top.value["orchestrator"], top.lines["orchestrator"], "orchestrator")
        extra = [k for k in orch.value if k not in ("type", "agent_model")]
        if extra:
            raise r.err(orch.lines[extra[0]], f"orchestrator.{extra[0]}", "unknown key (known: type, agent_model)")
        if orch.value.get("type", "thinkingbox") != "thinkingbox":
            raise r.err(orch.lines["type"], "orchestrator.type", f"{orch.value['type']!r}: only thinkingbox")
        if "agent_model" not in orch.value:
            raise r.err(orch.line, "orchestrator.agent_model", "required")
        agent_node, agent_line, agent_where = orch.value["agent_model"], orch.lines["agent_model"], "orchestrator.agent_model"
    elif "agent_model" in top.value:
        agent_node, agent_line, agent_where = top.value["agent_model"], top.lines["agent_model"], "agent_model"
    else:
        raise r.err(top.line, "orchestrator.agent_model", "required")
    for old in ("mcp_proxy_timeout", "mcp_proxy_use_dns_cache"):
        if old in top.value:
            r.notes.append(f"{old}: not used")

    body, opts = r.model(agent_node, agent_line, agent_where, "agent")
    if "seed" in opts:
        r.notes.append(f"{agent_where}.seed: not used (each episode has its own seed)")
    thinking = opts.get("_reasoning")
    policy = _spec(body, {"top_p": 1.0, "top_k": 0, **opts}, ("temperature", "top_p", "top_k", "max_tokens", "timeout", "retries",
                                                   "key_env"))
    if "judge_model" not in top.value:
        raise r.err(top.line, "judge_model", "required (the framework's config always names one)")
    jbody, jopts = r.model(top.value["judge_model"], top.lines["judge_model"], "judge_model", "judge")
    judge = _spec(jbody, {**jopts, "seed": jopts.get("seed", "none")},
                  ("temperature", "max_tokens", "seed", "timeout", "retries", "key_env"))
    user = None
    if top.value.get("user_model") is not None:
        ubody, uopts = r.model(top.value["user_model"], top.lines["user_model"], "user_model", "user")
        user = _spec(ubody, uopts, ("temperature", "max_tokens", "seed", "timeout", "retries", "key_env"))
    return TBRunConfig(policy=policy, user=user, judge=judge, thinking=thinking, notes=r.notes)


__all__ = ["TBConfigError", "TBRunConfig", "read_tb_config"]
