"""`python -m trainer.verl.node_setup check|kernels`: the GPU node's set-up checks
(scripts/setup_node.sh runs them in the environment it syncs).

`check`, before anything compiles: what building flash-attn and causal-conv1d from their locked
sources needs, every problem named with its fix in one run:

- **the CUDA toolkit**: nvcc in `CUDA_HOME` (else /usr/local/cuda, else on PATH), of the CUDA major
  the locked torch is built for (torch 2.13.0 on PyPI: CUDA 13.0), and the cuBLAS / cuSPARSE
  headers torch's headers include: in the toolkit, or in the environment's own CUDA wheels
  (nvidia/cu13/include), which setup_node.sh then puts on the compilers' include path;
- **gcc** (nvcc's host compiler) and **ninja** (the environment's, from the gpu extra: the kernel
  builds and vLLM's FlashInfer JIT run it);
- **memory for the nvcc jobs**: flash-attn reckons ~9 GB per job at 4 nvcc threads; `MAX_JOBS`
  jobs (unset: flash-attn picks min(cores / 2, available GB / 9)) x `NVCC_THREADS` / 4 x 9 GB
  must fit in the available memory;
- **disk**: room for the environment and uv's cache (the built wheels);
- **the NVIDIA driver**, where nvidia-smi is: at least the one torch's CUDA needs;
- **the architectures** flash-attn compiles (`FLASH_ATTN_CUDA_ARCHS`, default 80;90;100;120): each
  one more pass over its 72 kernel files; said, with the node's own GPU's where nvidia-smi tells.

`kernels`, after the build: every compiled kernel of the gpu extra imports (flash_attn and its
CUDA extension, causal_conv1d and its, fla, cupy, vllm), with its version.
Exit 0 when all hold, 1 when one does not (each FAIL line says what to do).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from trainer.verl.preflight import driver_check, torch_cuda

GB = 1024**3
JOB_GB = 9.0  # flash-attn's setup.py: "each JOB peak memory cost is ~8-9GB when threads = 4"
HEADERS = ("cublas_v2.h", "cusparse.h")  # what torch's CUDA headers include (ATen/cuda/CUDAContext.h)
KERNELS = (("flash_attn", "flash-attn", "flash_attn_2_cuda"), ("causal_conv1d", "causal-conv1d", "causal_conv1d_cuda"),
           ("fla", "fla-core", None), ("cupy", "cupy-cuda13x", None), ("vllm", "vllm", None))


@dataclass(frozen=True)
class Item:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


def _run(cmd: Sequence[str]) -> str | None:
    try:
        r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout + r.stderr if r.returncode == 0 else None


def cuda_home(env: Mapping[str, str]) -> Path | None:
    """Where the toolkit is, as torch's cpp_extension finds it: CUDA_HOME (CUDA_PATH), else
    /usr/local/cuda, else the directory above the nvcc on PATH."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            return Path(env[var])
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return Path("/usr/local/cuda")
    nvcc = shutil.which("nvcc", path=env.get("PATH", ""))
    return Path(nvcc).resolve().parent.parent if nvcc else None


def wheel_headers(prefix: Path = Path(sys.prefix)) -> Path | None:
    """The include directory of the environment's own CUDA wheels holding cuBLAS's and cuSPARSE's headers."""
    for d in sorted(prefix.glob("lib/python3*/site-packages/nvidia/cu*/include")):
        if all((d / h).is_file() for h in HEADERS):
            return d
    return None


def toolkit_items(env: Mapping[str, str]) -> list[Item]:
    torch_version, torch_cu = torch_cuda()
    home = cuda_home(env)
    nvcc = home / "bin" / "nvcc" if home else None
    if nvcc is None or not nvcc.exists():
        return [Item("CUDA toolkit", False, f"no nvcc ({'CUDA_HOME=' + str(home) if home else 'CUDA_HOME unset, none on PATH'}): "
                     f"install the CUDA {torch_cu or '?'} toolkit and set CUDA_HOME to it")]
    out = _run([str(nvcc), "--version"]) or ""
    found = re.search(r"release (\d+)\.(\d+)", out)
    have = f"{found.group(1)}.{found.group(2)}" if found else "?"
    items = []
    if torch_cu is None:
        items.append(Item("CUDA toolkit", False, f"torch {torch_version} here is a CPU build: the gpu extra's torch is "
                          "a CUDA build (uv sync --extra gpu in this environment first)"))
    elif not found or found.group(1) != torch_cu.split(".")[0]:
        items.append(Item("CUDA toolkit", False, f"{nvcc} is CUDA {have}; torch {torch_version} is built for CUDA {torch_cu}: "
                          f"the kernels must compile with the same major: install the CUDA {torch_cu.split('.')[0]} "
                          "toolkit and point CUDA_HOME at it"))
    else:
        items.append(Item("CUDA toolkit", True, f"{nvcc}: CUDA {have}, the major of torch {torch_version}'s CUDA {torch_cu}"))
    missing = [h for h in HEADERS if not (home / "include" / h).is_file()]
    if not missing:
        items.append(Item("CUDA headers", True, f"{', '.join(HEADERS)} in {home / 'include'}"))
    elif wheel_headers():
        items.append(Item("CUDA headers", True, f"{', '.join(missing)} not in {home / 'include'}; the environment's CUDA "
                          f"wheels have them ({wheel_headers()}): setup_node.sh adds it to the include path"))
    else:
        items.append(Item("CUDA headers", False, f"{', '.join(missing)} not in {home / 'include'} nor in the environment's "
                          "CUDA wheels: install the toolkit's cuBLAS and cuSPARSE development headers"))
    return items


def compiler_items(env: Mapping[str, str]) -> list[Item]:
    path = env.get("PATH", "")
    gcc = shutil.which("gcc", path=path)
    items = [Item("gcc", bool(gcc), (_run([gcc, "--version"]) or "").splitlines()[0] if gcc else
                  "no gcc on PATH (nvcc's host compiler): install gcc and g++ (e.g. apt-get install build-essential)")]
    ninja = Path(sys.prefix) / "bin" / "ninja"
    items.append(Item("ninja", ninja.exists(), str(ninja) if ninja.exists() else
                      f"{ninja} missing: the gpu extra installs it (uv sync --extra gpu in this environment)"))
    return items


def available_memory() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def memory_item(env: Mapping[str, str], available: int | None = None) -> Item:
    available = available_memory() if available is None else available
    threads = int(env.get("NVCC_THREADS") or 4)
    per_job = JOB_GB * max(threads, 1) / 4
    jobs = env.get("MAX_JOBS")
    if not jobs:
        cores = max(1, (os.cpu_count() or 1) // 2)
        pick = max(1, min(cores, int(available / GB / JOB_GB)))
        ok = available / GB >= per_job
        return Item("memory for nvcc jobs", ok, f"MAX_JOBS unset: flash-attn runs {pick} job(s) (min(cores / 2, "
                    f"available GB / 9)); {available / GB:.1f} GB available" + ("" if ok else
                    f", under one job's ~{per_job:.0f} GB: free memory, or NVCC_THREADS=1"))
    need = int(jobs) * per_job
    ok = available / GB >= need
    return Item("memory for nvcc jobs", ok, f"MAX_JOBS={jobs} x ~{per_job:.1f} GB (NVCC_THREADS={threads}) = ~{need:.0f} GB, "
                f"{available / GB:.1f} GB available" + ("" if ok else f": lower MAX_JOBS to {max(1, int(available / GB / per_job))}"))


def disk_item(env: Mapping[str, str], min_gb: float) -> Item:
    where = Path(sys.prefix)
    cache = Path(env.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    worst = []
    for d in (where, cache):
        probe = d
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        worst.append((shutil.disk_usage(probe).free / GB, d))
    free, d = min(worst)
    return Item("disk", free >= min_gb, f"{free:.0f} GB free for {d} (the environment and uv's cache need ~{min_gb:.0f} GB)"
                + ("" if free >= min_gb else ": free space there, or set UV_CACHE_DIR / UV_PROJECT_ENVIRONMENT elsewhere"))


def driver_item(env: Mapping[str, str]) -> Item:
    c = driver_check(env)
    return Item("NVIDIA driver", c.ok, c.detail)


def arch_item(env: Mapping[str, str]) -> Item:
    archs = env.get("FLASH_ATTN_CUDA_ARCHS") or "80;90;100;120"
    caps = _run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    mine = sorted({c.strip().replace(".", "") for c in (caps or "").splitlines() if c.strip()})
    missing = [a for a in mine if a not in archs.split(";")]
    detail = (f"flash-attn compiles its 72 kernel files for each of {archs}"
              + (f"; this node's GPUs are sm_{', sm_'.join(mine)}" if mine else "; no nvidia-smi here")
              + ("" if archs != "80;90;100;120" else " (FLASH_ATTN_CUDA_ARCHS=90 builds H100/H200 only, a quarter of the time)"))
    return Item("flash-attn architectures", not missing, detail + (f": add {';'.join(missing)} to FLASH_ATTN_CUDA_ARCHS" if missing else ""))


def check(env: Mapping[str, str], min_disk_gb: float = 20.0) -> list[Item]:
    return [*toolkit_items(env), *compiler_items(env), memory_item(env), disk_item(env, min_disk_gb), driver_item(env),
            arch_item(env)]


def kernels() -> list[Item]:
    items = []
    for module, dist, extension in KERNELS:
        try:
            importlib.import_module(module)
            if extension:
                importlib.import_module(extension)
            items.append(Item(f"kernel {module}", True, f"{dist} {md.version(dist)} imports"
                              + (f" (and its CUDA extension {extension})" if extension else "")))
        except Exception as e:  # noqa: BLE001 - any failure to load is the finding
            items.append(Item(f"kernel {module}", False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
                              "(rerun bash scripts/setup_node.sh: it builds what is missing)"))
    return items


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.verl.node_setup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("check", "kernels", "include"))
    ap.add_argument("--min-disk-gb", type=float, default=20.0)
    args = ap.parse_args(argv)
    if args.what == "include":  # the include directory setup_node.sh adds, where the toolkit lacks the headers
        home = cuda_home(os.environ)
        if home and all((home / "include" / h).is_file() for h in HEADERS):
            return 0
        found = wheel_headers()
        print(found or "")
        return 0
    items = check(os.environ, args.min_disk_gb) if args.what == "check" else kernels()
    for item in items:
        print(item.line())
    bad = [i.name for i in items if not i.ok]
    if bad:
        print(f"error: {len(bad)} problem(s): {', '.join(bad)} (the FAIL lines above)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
