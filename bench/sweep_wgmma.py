"""Sweep the Hopper GEMM's configurations (examples/gemm_wgmma.py) in one GPU call.

Every configuration is built first (in parallel threads: NVRTC releases the GIL), then,
for each size and dtype, ``torch.matmul`` (cuBLAS), Triton's tutorial kernel
(bench/bench_mma.py's, one fixed configuration) and each configuration are timed in the
same process (medians of ``triton.testing.do_bench``); each Thork result is checked
against a float32 product of the same inputs first. Output is the input type (as
torch.matmul gives) unless a configuration says ``out=float32``.

A configuration that hangs ends the process (a watchdog); ``--state`` keeps what finished
so a rerun skips it and marks the hung one.

    python bench/sweep_wgmma.py --state $OUT/sweep.json [--sizes 4096 8192] [--only A,B]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

#: name -> gemm() keywords (BN, WM, CONSUMERS, STAGES, GROUP_M, staged, persistent, out).
CONFIGS: dict[str, dict[str, Any]] = {
    "A 128x256/4 g8": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=8),
    "B 128x256/4 g8 staged": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=8,
                                  staged=True),
    "C 128x256/4 g16": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=16),
    "D 128x256/4 one tile a block": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=8,
                                         persistent=False),
    "E 256x128/4 g8": dict(BN=128, WM=128, CONSUMERS=2, STAGES=4, GROUP_M=8),
    "F 256x192/4 g8": dict(BN=192, WM=128, CONSUMERS=2, STAGES=4, GROUP_M=8),
    "G 128x256/3 g8": dict(BN=256, WM=64, CONSUMERS=2, STAGES=3, GROUP_M=8),
    "H 256x128/4 g8 staged": dict(BN=128, WM=128, CONSUMERS=2, STAGES=4, GROUP_M=8,
                                  staged=True),
    "I 128x256/4 g8 fp32 out": dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=8,
                                    out="float32"),
}


def _kernel_of(hopper: Any, dtype: str, cfg: dict[str, Any]) -> Any:
    """The specialized kernel a configuration launches (for building ahead)."""
    out = cfg.get("out", dtype)
    staged = bool(cfg.get("staged", False))
    return hopper.gemm_kernel(dtype, out).specialize(
        BN=cfg["BN"], WM=cfg["WM"], CONSUMERS=cfg["CONSUMERS"], STAGES=cfg["STAGES"],
        GROUP_M=cfg["GROUP_M"], PAIRS=True, STAGED=staged)


def run_case(n: int, dtype: str, configs: dict[str, dict[str, Any]], state: dict[str, Any],
             save: Any, hopper: Any, tri: Any, do_bench: Any, sms: int,
             watchdog: float) -> None:
    """Time torch, Triton and every configuration at n^3 in ``dtype``."""
    import torch

    tdt = getattr(torch, dtype)
    torch.manual_seed(n)
    a = torch.randn(n, n, device="cuda", dtype=tdt)
    b = torch.randn(n, n, device="cuda", dtype=tdt)
    bt = b.t().contiguous()
    ref = torch.matmul(a.float(), b.float())
    flops = 2.0 * n ** 3
    key = f"{n} {dtype}"
    anchors = state.setdefault("anchors", {}).setdefault(key, {})
    anchors["torch"] = flops / do_bench(lambda: torch.matmul(a, b),
                                        return_mode="median") / 1e9
    ct = torch.empty(n, n, device="cuda", dtype=tdt)
    tri(a, b, ct)
    anchors["triton"] = flops / do_bench(lambda: tri(a, b, ct),
                                         return_mode="median") / 1e9
    print(f"{key}: torch {anchors['torch']:.1f}  triton {anchors['triton']:.1f}")
    save()
    for name, cfg in configs.items():
        rkey = f"{key} {name}"
        if rkey in state["results"]:
            continue
        state["running"] = rkey
        save()
        faulthandler.dump_traceback_later(watchdog, exit=True)
        out = cfg.get("out", dtype)
        c = torch.full((n, n), float("nan"), device="cuda", dtype=getattr(torch, out))
        kw = {k: v for k, v in cfg.items() if k not in ("out", "persistent")}
        tiles = -(-n // (cfg["WM"] * cfg["CONSUMERS"])) * -(-n // cfg["BN"])
        blocks = sms if cfg.get("persistent", True) else tiles
        row: dict[str, Any] = {}
        try:
            fn = hopper.prepare(c, a, bt, n, n, n, dtype, blocks=blocks, target="gpu", **kw)
            fn()
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            row["rel_err"] = err
            row["ok"] = bool(err < (1e-2 if out != "float32" else 1e-4)
                             and not torch.isnan(c).any().item())
            row["tflops"] = flops / do_bench(fn, return_mode="median") / 1e9
            row["vs_torch"] = row["tflops"] / anchors["torch"]
            row["vs_triton"] = row["tflops"] / anchors["triton"]
            print(f"  {rkey:<42} {row['tflops']:7.1f} TF/s  /torch "
                  f"{row['vs_torch']:.3f}  /triton {row['vs_triton']:.3f}  "
                  f"err {err:.1e} {'ok' if row['ok'] else 'MISMATCH'}")
        except Exception as exc:  # noqa: BLE001 - keep the other rows
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            print(f"  {rkey}: failed ({row['error']})")
        faulthandler.cancel_dump_traceback_later()
        state["results"][rkey] = row
        state["running"] = None
        save()
        del c
    anchors["torch_after"] = flops / do_bench(lambda: torch.matmul(a, b),
                                              return_mode="median") / 1e9
    print(f"{key}: torch again {anchors['torch_after']:.1f}")
    save()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, required=True, help="results JSON (kept, resumed)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    ap.add_argument("--only", default="", help="comma-separated config letters")
    ap.add_argument("--watchdog", type=float, default=60.0, help="seconds per config")
    opts = ap.parse_args()

    import bench_mma
    import torch
    from triton.testing import do_bench

    hopper = bench_mma._example("gemm_wgmma")
    state: dict[str, Any] = json.loads(opts.state.read_text()) if opts.state.exists() else {}
    state.setdefault("results", {})
    hung = state.get("running")
    if hung:
        state["results"][hung] = {"hung": True}
        print(f"previous run hung in: {hung}")
    state["running"] = None

    def save() -> None:
        opts.state.parent.mkdir(parents=True, exist_ok=True)
        opts.state.write_text(json.dumps(state, indent=1))

    only = {x.strip() for x in opts.only.split(",") if x.strip()}
    configs = {k: v for k, v in CONFIGS.items() if not only or k.split()[0] in only}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name(0)}, {sms} SMs")

    t0 = time.time()
    todo = [(d, c) for d in opts.dtypes for c in configs.values()]
    with ThreadPoolExecutor(16) as ex:
        for f in [ex.submit(lambda d=d, c=c: _kernel_of(hopper, d, c).artifact("sm_90"))
                  for d, c in todo]:
            try:
                f.result()
            except Exception as exc:  # noqa: BLE001 - reported in its row below
                print(f"build failed: {type(exc).__name__}: {exc}"[:300])
    print(f"built {len(todo)} kernels in {time.time() - t0:.1f} s")
    tri = bench_mma._triton_matmul()

    for n in opts.sizes:
        for dtype in opts.dtypes:
            run_case(n, dtype, configs, state, save, hopper, tri, do_bench, sms,
                     opts.watchdog)
            torch.cuda.empty_cache()

    print("\nbest per size and dtype:")
    for key, anc in state.get("anchors", {}).items():
        rows = [(r["tflops"], k) for k, r in state["results"].items()
                if k.startswith(key + " ") and r.get("ok")]
        if rows:
            tf, k = max(rows)
            print(f"{key:<16} {tf:7.1f} TF/s ({k[len(key) + 1:]})  torch {anc['torch']:.1f} "
                  f"({tf / anc['torch']:.3f})  triton {anc['triton']:.1f} "
                  f"({tf / anc['triton']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
