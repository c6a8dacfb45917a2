"""`tbt serve-proxy`: the OpenAI-compatible proxy in front of vLLM (trainer/serve/proxy.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.rollout.config import RunConfig
from trainer.run_cli import takes


@takes("run", RunConfig, ("family",), as_dict=True)
def serve_proxy_command(
    run: dict,
    upstream: Annotated[str, typer.Option("--upstream", help="The upstream API base URL (vLLM serving the checkpoint).")] = "http://127.0.0.1:8001/v1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8014,
    host: Annotated[str, typer.Option("--host", help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    model: Annotated[Optional[str], typer.Option("--model", help="Upstream model name (default: the request's).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds an upstream completion may take.")] = 600.0,
    record: Annotated[Optional[Path], typer.Option("--record", help="Also append every completion to this JSONL as a parity record (for tbt parity).")] = None,
) -> None:
    """Serve /v1/chat/completions that renders and reads the model with tb_interpret (as training does).

    Leading system messages are merged ("sysmerge"), the prompt is rendered for the family and sent
    to the upstream's /v1/completions; the text is parsed by tb_interpret into reasoning_content,
    content and typed tool_calls. GET /readyz answers 200 only while the upstream does.

    With --record FILE every completion is appended to FILE as a parity record (the raw text,
    the upstream's token ids, the tools): `tbt parity FILE --against vllm` then checks that
    training, evaluation and vLLM's own parsers read what the model really wrote identically.

    \b
    Examples:
      tbt serve-proxy --upstream http://127.0.0.1:8001/v1 --port 8014
      tbt serve-proxy --upstream http://127.0.0.1:8001/v1 --port 8015 --record proxy-parity.jsonl
    """
    import uvicorn

    from trainer.core.tb_interpret import FAMILIES
    from trainer.serve.proxy import ProxyConfig, build_app

    family = run["family"]
    if family not in FAMILIES:
        typer.echo(f"error: --family {family!r}: expected {' or '.join(FAMILIES)}", err=True)
        raise typer.Exit(2)
    if record is not None and record.is_dir():
        typer.echo(f"error: --record {record}: is a directory", err=True)
        raise typer.Exit(2)
    app = build_app(ProxyConfig(upstream=upstream, family=family, model=model, timeout_s=timeout,  # type: ignore[arg-type]
                                record=str(record) if record is not None else None))
    serve(uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")),
          f"upstream {upstream}, family {family}" + (f", recording to {record}" if record is not None else ""))


def serve(server, what: str) -> None:
    """Run a uvicorn server, printing `listening on http://HOST:PORT (what)` once its socket is
    bound (the port it really got: --port 0 picks a free one); one that cannot bind is uvicorn's
    message and ours naming the address, exit 1."""
    import asyncio

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.05)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"tbt serve-proxy: listening on http://{shown}:{port} ({what}); Ctrl-C stops it")

    async def main() -> None:
        task = asyncio.create_task(announce())
        try:
            await server.serve()
        finally:
            task.cancel()

    try:
        asyncio.run(main())
    except SystemExit:  # uvicorn's own exit when it cannot start (it said why above)
        pass
    if not server.started:
        cfg = server.config
        typer.echo(f"error: tbt serve-proxy: could not listen on {cfg.host}:{cfg.port} (--host, --port)", err=True)
        raise typer.Exit(1)
