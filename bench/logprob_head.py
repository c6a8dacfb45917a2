"""The LM head's log-probs and entropies at the kept positions, forward and backward: patch 0006's
`_KeptLogProbs` (verl's dense_common, as trainer/verl/patches installs it) against verl's own
`FusedLinearForPPO`, the baseline, measured in the same run on this machine's device:

    uv run python bench/logprob_head.py [--json] [--repeat N]

Each case (dtype, vocabulary V, hidden H, positions N) runs a loss on the log-probs (the kept
function not asked for the entropies: the engine's update without an entropy coefficient), then
one on the log-probs and the entropies, through both, and prints the seconds of each (the best of N), the
ratio stock / kept, and the largest difference of the values and gradients relative to stock's
largest. It fails (exit 1) if a difference is beyond the dtype's rounding (float32 1e-4, bfloat16
2e-2). Measured on 2 CPU cores: 3.0x for 271 positions of the 151k x 64 laptop head (3.3x for 1024),
1.5x with the entropies in the loss; on an H200 (before the entropies were skipped when unread):
1.35x for 4096 positions of a 151k x 4096 bfloat16 head. The last line with `--json` is one object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

CASES_CPU = [("float32", 151669, 64, 271), ("float32", 151669, 64, 1024)]
CASES_CUDA = [("float32", 151669, 64, 271), ("bfloat16", 151669, 64, 2048), ("bfloat16", 151936, 4096, 4096),
              ("float32", 151936, 1024, 2048)]
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="end with one JSON object")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each (the best is kept)")
    args = ap.parse_args(argv)
    import torch
    from verl.models.transformers import dense_common
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    kept_fn = getattr(dense_common, "_KeptLogProbs", None)
    if kept_fn is None:
        print("error: verl's dense_common has no _KeptLogProbs: run `uv run python scripts/prepare_verl.py --install`",
              file=sys.stderr)
        return 2
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    results: dict[str, dict] = {}
    for dtype_name, vocab, hidden, n in CASES_CUDA if dev == "cuda" else CASES_CPU:
        dtype = getattr(torch, dtype_name)
        g = torch.Generator(device=dev).manual_seed(0)
        w = (torch.randn(vocab, hidden, device=dev, generator=g) * 0.02).to(dtype).requires_grad_()
        h = torch.randn(n, hidden, device=dev, generator=g).to(dtype).requires_grad_()
        ids = torch.randint(0, vocab, (n,), device=dev, generator=g)
        weight_lp, weight_ent = torch.rand(n, device=dev, generator=g), torch.rand(n, device=dev, generator=g)
        ways = {"stock": lambda: FusedLinearForPPO().forward(hidden_states=h, vocab_weights=w, input_ids=ids, temperature=0.7),
                # the entropies computed only when read, as the engine asks (calculate_entropy)
                "kept": lambda entropy: kept_fn.apply(h, w, ids, 0.7, 512, entropy)}

        def run(way: str, entropy: bool) -> tuple[list, float]:
            w.grad = h.grad = None
            sync()
            t = time.perf_counter()
            lp, ent = ways[way](entropy) if way == "kept" else ways[way]()
            ((lp * weight_lp).sum() + (ent * weight_ent).sum() * (1.0 if entropy else 0.0)).backward()
            sync()
            return [lp.detach().float(), ent.detach().float(), h.grad.float(), w.grad.float()], time.perf_counter() - t

        for entropy in (False, True):
            stock, _ = run("stock", entropy)
            kept, _ = run("kept", entropy)
            secs = {way: min(run(way, entropy)[1] for _ in range(args.repeat)) for way in ways}
            diff = {name: round((b - a).abs().max().item() / (a.abs().max().item() or 1.0), 9)
                    for name, a, b in zip(("log_probs", "entropy", "d_hidden", "d_weights"), stock, kept)
                    if entropy or name != "entropy"}  # not computed when not read
            key = f"{dtype_name} V{vocab} H{hidden} N{n}" + (" +entropy" if entropy else "")
            results[key] = {"stock_s": round(secs["stock"], 5), "kept_s": round(secs["kept"], 5),
                            "ratio": round(secs["stock"] / secs["kept"], 2), "max_rel_diff": diff,
                            "ok": max(diff.values()) <= TOLERANCE[dtype_name]}
            r = results[key]
            print(f"{dev:4} {key:36} stock {r['stock_s']:.4f} s  kept {r['kept_s']:.4f} s  {r['ratio']:.2f}x  "
                  f"max rel diff {max(diff.values()):.1e}{'' if r['ok'] else '  BEYOND ROUNDING'}", flush=True)
    ok = all(r["ok"] for r in results.values())
    if args.json:
        print(json.dumps({"device": dev, "cases": results, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
