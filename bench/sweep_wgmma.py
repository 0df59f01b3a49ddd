"""Sweep the Hopper GEMM's configurations (examples/gemm_wgmma.py) in one GPU call.

Every configuration is built first (in parallel threads: NVRTC releases the GIL). Then,
for each size and dtype, each configuration runs once on fresh random inputs and is
checked against a float32 product of them (poisoned output, relative error), and
``torch.matmul`` (cuBLAS), Triton's tutorial kernel (bench/bench_mma.py's, one fixed
configuration) and every configuration that passed are timed ``--rounds`` times in
alternating order (forward, backward, ...: the GPU's clock drifts as it warms), medians
of ``triton.testing.do_bench`` each; a row reports the median over rounds. Output is the
input type (as torch.matmul gives) unless a configuration says ``out=float32``.

``CONFIGS`` are swept by default (row "D" is the example's own default for the shape:
``prepare`` given no tile keyword); ``MORE`` holds earlier sessions' rows, which ``--only``
also takes. A configuration with ``dtypes`` runs for those input types only.

A configuration that hangs ends the process (a watchdog); ``--state`` keeps what finished
so that a rerun skips it and marks the hung one.

    python bench/sweep_wgmma.py --state $OUT/sweep.json [--sizes 4096 8192] [--only B,KT]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

_BASE = dict(BN=256, WM=64, CONSUMERS=2, STAGES=4, GROUP_M=8)
#: name (its first word is what --only takes) -> examples/gemm_wgmma.prepare keywords;
#: ``persistent=False``: one block per tile, ``out``: the output dtype.
CONFIGS: dict[str, dict[str, Any]] = {
    # no tile keyword: the example's default for the shape (its TUNED table)
    "D the example's default (tuned)": dict(tuned=True),
    "B 128x256/4 staged": dict(_BASE, epilogue="staged"),
    "B128 128x256/4 staged 128 blocks": dict(_BASE, epilogue="staged", blocks=128),
    "T 128x256/4 tma": dict(_BASE, epilogue="tma"),
    "T128 128x256/4 tma 128 blocks": dict(_BASE, epilogue="tma", blocks=128),
    "KT 128x256/4 tma cluster2": dict(_BASE, epilogue="tma", cluster=2),
    "KT128 128x256/4 tma cluster2 128 blocks": dict(_BASE, epilogue="tma", cluster=2,
                                                    blocks=128),
    "F3T 256x192/3 tma cluster2": dict(BN=192, WM=128, CONSUMERS=2, STAGES=3, GROUP_M=8,
                                       epilogue="tma", cluster=2),
    # bfloat16 only: session 9's software rounding (bf16_nan="keep"), against the rows
    # above (the hardware's cvt.rn.bf16x2.f32 since session 10)
    "Bsw 128x256/4 staged, software bf16 rounding": dict(_BASE, epilogue="staged",
                                                         bf16_nan="keep",
                                                         dtypes=("bfloat16",)),
    "KT128sw 128x256/4 tma cluster2 128 blocks, software bf16 rounding": dict(
        _BASE, epilogue="tma", cluster=2, blocks=128, bf16_nan="keep",
        dtypes=("bfloat16",)),
}
#: Earlier sessions' configurations, no longer swept by default (--only takes them too).
MORE: dict[str, dict[str, Any]] = {
    "K 128x256/4 staged cluster2": dict(_BASE, epilogue="staged", cluster=2),
    "KTg16 128x256/4 tma cluster2 g16": dict(_BASE, epilogue="tma", cluster=2, GROUP_M=16),
    "HT 256x128/4 tma cluster2": dict(BN=128, WM=128, CONSUMERS=2, STAGES=4, GROUP_M=8,
                                      epilogue="tma", cluster=2),
    "KTd 128x256/4 tma cluster2 one tile a block": dict(_BASE, epilogue="tma", cluster=2,
                                                        persistent=False),
}


def _kernel_of(hopper: Any, dtype: str, cfg: dict[str, Any], n: int) -> Any:
    """The specialized kernel a configuration launches at n^3 (for building ahead)."""
    if cfg.get("tuned"):
        cfg = hopper.tuned(n, n, n, dtype, dtype)
    return hopper.gemm_kernel(dtype, cfg.get("out", dtype)).specialize(
        BN=cfg["BN"], WM=cfg["WM"], CONSUMERS=cfg["CONSUMERS"], STAGES=cfg["STAGES"],
        GROUP_M=cfg["GROUP_M"], PAIRS=True,
        EPILOGUE=hopper.EPILOGUES[cfg.get("epilogue", "direct")],
        CLUSTER=cfg.get("cluster", 1),
        CANONICAL=cfg.get("bf16_nan", "canonical") == "canonical")


def run_case(n: int, dtype: str, configs: dict[str, dict[str, Any]], state: dict[str, Any],
             save: Any, hopper: Any, tri: Any, do_bench: Any, sms: int, watchdog: float,
             rounds: int) -> None:
    """Check every configuration at n^3 in ``dtype``, then time torch, Triton and the
    good ones ``rounds`` times in alternating order."""
    import torch

    tdt = getattr(torch, dtype)
    torch.manual_seed(n)
    a = torch.randn(n, n, device="cuda", dtype=tdt)
    b = torch.randn(n, n, device="cuda", dtype=tdt)
    bt = b.t().contiguous()
    ref = torch.matmul(a.float(), b.float())
    flops = 2.0 * n ** 3
    key = f"{n} {dtype}"
    ct = torch.empty(n, n, device="cuda", dtype=tdt)
    tri(a, b, ct)
    timed: dict[str, Any] = {"torch": lambda: torch.matmul(a, b),
                             "triton": lambda: tri(a, b, ct)}
    keep = []
    for name, cfg in configs.items():
        if dtype not in cfg.get("dtypes", (dtype,)):
            continue
        rkey = f"{key} {name}"
        if rkey in state["results"]:
            continue
        state["running"] = rkey
        save()
        faulthandler.dump_traceback_later(watchdog, exit=True)
        out = cfg.get("out", dtype)
        c = torch.full((n, n), float("nan"), device="cuda", dtype=getattr(torch, out))
        kw = {k: v for k, v in cfg.items()
              if k not in ("out", "persistent", "dtypes", "tuned")}
        if not cfg.get("tuned"):
            tiles = -(-n // (cfg["WM"] * cfg["CONSUMERS"])) * -(-n // cfg["BN"])
            kw.setdefault("blocks", sms if cfg.get("persistent", True) else tiles)
        row: dict[str, Any] = {}
        try:
            fn = hopper.prepare(c, a, bt, n, n, n, dtype, target="gpu", **kw)
            fn()
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            row["rel_err"] = err
            row["ok"] = bool(err < (1e-2 if out != "float32" else 1e-4)
                             and not torch.isnan(c).any().item())
            t0 = time.time()
            row["first"] = flops / do_bench(fn, return_mode="median") / 1e9
            row["bench_s"] = time.time() - t0
            print(f"  {rkey:<48} {row['first']:7.1f} TF/s  err {err:.1e} "
                  f"{'ok' if row['ok'] else 'MISMATCH'}")
            if row["ok"]:
                timed[name] = fn
                keep.append((name, rkey, c))
        except Exception as exc:  # noqa: BLE001 - keep the other rows
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            print(f"  {rkey}: failed ({row['error']})")
        faulthandler.cancel_dump_traceback_later()
        state["results"][rkey] = row
        state["running"] = None
        save()
    samples: dict[str, list[float]] = {k: [] for k in timed}
    order = list(timed)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            samples[name].append(flops / do_bench(timed[name], return_mode="median") / 1e9)
    anchors = state.setdefault("anchors", {}).setdefault(key, {})
    for name in ("torch", "triton"):
        anchors[name] = statistics.median(samples[name])
        anchors[name + "_rounds"] = samples[name]
    print(f"{key}: torch {anchors['torch']:.1f} {samples['torch']}  triton "
          f"{anchors['triton']:.1f} {samples['triton']}")
    for name, rkey, _ in keep:
        row = state["results"][rkey]
        row["rounds"] = samples[name]
        row["tflops"] = statistics.median(samples[name])
        row["vs_torch"] = row["tflops"] / anchors["torch"]
        row["vs_triton"] = row["tflops"] / anchors["triton"]
        print(f"  {rkey:<48} {row['tflops']:7.1f} TF/s  /torch {row['vs_torch']:.3f}  "
              f"/triton {row['vs_triton']:.3f}  {[round(x, 1) for x in samples[name]]}")
    save()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, required=True, help="results JSON (kept, resumed)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    ap.add_argument("--only", default="", help="comma-separated config names (first word)")
    ap.add_argument("--rounds", type=int, default=2, help="timings per config, alternating")
    ap.add_argument("--watchdog", type=float, default=25.0, help="seconds per config")
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
        if {**CONFIGS, **MORE}.get(hung.split(" ", 2)[2], {}).get("cluster", 1) > 1:
            state["skip_clusters"] = True        # the others would hang the same way
    state["running"] = None

    def save() -> None:
        opts.state.parent.mkdir(parents=True, exist_ok=True)
        opts.state.write_text(json.dumps(state, indent=1))

    only = {x.strip() for x in opts.only.split(",") if x.strip()}
    every = CONFIGS if not only else {**CONFIGS, **MORE}
    configs = {k: v for k, v in every.items() if (not only or k.split()[0] in only)
               and not (state.get("skip_clusters") and v.get("cluster", 1) > 1)}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name(0)}, {sms} SMs")

    t0 = time.time()
    todo = [(d, c, n) for d in opts.dtypes for c in configs.values()
            for n in (opts.sizes if c.get("tuned") else opts.sizes[:1])
            if d in c.get("dtypes", (d,))]
    with ThreadPoolExecutor(16) as ex:
        for f in [ex.submit(lambda d=d, c=c, n=n: _kernel_of(hopper, d, c, n)
                            .artifact("sm_90")) for d, c, n in todo]:
            try:
                f.result()
            except Exception as exc:  # noqa: BLE001 - reported in its row below
                print(f"build failed: {type(exc).__name__}: {exc}"[:300])
    print(f"built {len(todo)} kernels in {time.time() - t0:.1f} s")
    tri = bench_mma._triton_matmul()

    for n in opts.sizes:
        for dtype in opts.dtypes:
            run_case(n, dtype, configs, state, save, hopper, tri, do_bench, sms,
                     opts.watchdog, opts.rounds)
            torch.cuda.empty_cache()

    print("\nbest per size and dtype (medians over rounds):")
    for key, anc in state.get("anchors", {}).items():
        rows = [(r["tflops"], k) for k, r in state["results"].items()
                if k.startswith(key + " ") and r.get("ok") and "tflops" in r]
        if rows:
            tf, k = max(rows)
            print(f"{key:<16} {tf:7.1f} TF/s ({k[len(key) + 1:]})  torch {anc['torch']:.1f} "
                  f"({tf / anc['torch']:.3f})  triton {anc['triton']:.1f} "
                  f"({tf / anc['triton']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
