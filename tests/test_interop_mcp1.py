"""Interop with the reference's server generation: an mcp 1.x FastMCP server over stdio.

The setup builds a throwaway venv with `mcp<2` under `.cache/interop-mcp1` (gitignored, reused
across runs; PyPI is needed once) and runs tests/fixtures/servers/notes_server_v1.py in it.
Our client (mcp 2.x) must open sessions, speak the reserved protocol, see the server's own error
texts, and replay the fixture dataset's golden actions to passing verdicts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.env.sandbox.mcp_host import Sandbox, ServerConnection, ServerRegistry, ServerSpec
from trainer.env.taskformat.tasks import load_dataset

ROOT = Path(__file__).parents[1]
VENV = ROOT / ".cache" / "interop-mcp1"
SERVER = ROOT / "tests" / "fixtures" / "servers" / "notes_server_v1.py"
DATASET = ROOT / "tests" / "fixtures" / "datasets" / "sandbox"

pytestmark = pytest.mark.anyio



@pytest.fixture(scope="module")
def v1_python() -> str:
    py = VENV / "bin" / "python"
    probe = [str(py), "-c", "import importlib.metadata as m, sys; sys.exit(m.version('mcp').split('.')[0] != '1')"]
    if not (py.exists() and subprocess.run(probe).returncode == 0):
        uv = shutil.which("uv")
        assert uv, "uv is needed to build the mcp 1.x venv"
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([uv, "venv", "-q", "--python", f"{sys.version_info.major}.{sys.version_info.minor}", str(VENV)],
                       check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(py), "mcp>=1.20,<2"], check=True)
        assert subprocess.run(probe).returncode == 0
    return str(py)


def registry(py: str) -> ServerRegistry:
    return ServerRegistry({"notes": ServerSpec("notes", "mcp-process", command=[py, str(SERVER)])})


async def test_handshake_protocol_and_errors(v1_python):
    async with ServerConnection(registry(v1_python).get("notes")) as conn:
        assert conn._client.protocol_version == "2025-11-25"
        assert conn._client.server_info.name == "notes-v1"
        assert {"__reserved__init", "__reserved__geteffects", "add_note"} <= set(conn.tools)
    task = load_dataset(DATASET).tasks["notes_tasks.py:test_add_note"]
    async with Sandbox(task, registry(v1_python)) as sb:
        assert sb.init_result["notes"]["session_id"] == sb.session_id
        assert "__reserved__init" not in {t["name"] for t in sb.tools}
        assert await sb.call_tool("add_note", {"text": "buy milk", "label": "shopping"}) == '{"id": 3}'
        bad = await sb.call_tool("set_label", {"note_id": "seven", "label": "x"})
        assert "validation error" in bad and "note_id" in bad  # the 1.x server's own text
        assert await sb.call_tool("nope", {}) == "Error: function 'nope' does not exist"
        fx = (await sb.effects())["notes"]
        assert fx["result_db_hash"] == fx["golden_db_hash"]


def test_golden_replay_over_mcp1(v1_python, tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(f'servers:\n  notes:\n    type: mcp-process\n    command: ["{{python}}", "{SERVER}"]\n')
    r = CliRunner().invoke(app, ["validate-golden", str(DATASET), "--test-list", str(DATASET / "lists" / "strong.yaml"),
                                 "--servers", str(servers), "--python", v1_python, "--concurrency", "4", "--json"])
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.exit_code == 0, s["failures"]
    assert (s["tasks"], s["passed"], s["system_errors"]) == (4, 4, 0)


async def test_mcp1_fastmcp_server_forks_and_reuses(v1_python):
    """`start: fork` / `reuse` (trainer/env/sandbox/forkserver.py) on the reference generation (mcp 1.x
    FastMCP, its own interpreter) give spawn's verdicts (its stdio wraps sys.stdout.buffer: the
    child's stdio must be a pipe's)."""
    from trainer.env.golden import validate_golden

    tasks = list(load_dataset(DATASET, strict=True).tasks.values())
    out = {}
    for start in ("spawn", "fork", "reuse"):
        reg = ServerRegistry({"notes": ServerSpec("notes", "mcp-process", start=start,
                                                  command=[v1_python, str(SERVER)])})
        out[start] = await validate_golden(tasks, reg, noop=True, strip=True, concurrency=2)
        reg.close()
    verdicts = {s: [(r["uid"], r["golden"], r["noop"]) for r in out[s]["results"]] for s in out}
    assert verdicts["fork"] == verdicts["spawn"] == verdicts["reuse"]
    for start in ("fork", "reuse"):
        st = out[start]["process_starts"]["notes"]
        assert (st["mode"], st["proofs_failed"]) == (start, 0), st
