"""Session 13 (issue 16): bench_lang's row kernels against Triton's, instruction by
instruction, with no GPU.

For each case (``op/dtype/N``, M = 4096 rows), compiles for sm_90:

* Thork's kernel with its :data:`bench_lang.LAYOUTS` pick (or ``--cfg``), through
  ``Kernel.artifact("sm_90")`` (the compiler a GPU launch would use);
* Triton's tutorial-style kernel, the same ``triton.jit`` source bench_lang times
  (``bench_lang._triton_jit``), through ``triton.compile(ASTSource(...),
  target=GPUTarget("cuda", 90, 32))`` with the ``num_warps`` bench_lang launches it with
  and the specialisation its JIT gives at run time (pointers and ``n_cols`` divisible by
  16); skipped where Triton is not importable;

disassembles both (``cuobjdump -sass``) and prints, per kernel: registers, static shared
memory, threads a block, rows a block, blocks an SM (registers, threads, shared memory;
H200: 64 K registers, 2048 threads, 32 blocks, 228 KiB), the grid, and the instruction
counts by class, as static per-thread counts and as warp instructions a row (static count
x warps a block / rows a block: exact for kernels without loops, which all three cases of
session 13 are; subroutines, i.e. IEEE division's slow path, left out), the bytes of rows
an SM holds at once (blocks an SM x rows a block x row bytes: the loads in flight of a
kernel that issues all of a row's loads first), and the global bytes read and written a
row (every ``LDG``/``STG`` width x threads a row: one pass over the row's input reads
``N x itemsize``).

    PYTHONPATH=/tmp/triton-site:... python bench/sass_rows.py \\
        [--only layer_norm/float16/1024,...] [--cfg '{"threads": 128, ...}'] [--fast]
        [--dump DIR]

Triton is never imported by the package or the tests; installing it for this script is
``pip install --target DIR triton==3.6.0`` and ``PYTHONPATH=DIR``. No Triton-generated
code is written into the repository (``--dump`` writes where it is told).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_lang as bl  # noqa: E402
import thork as tk  # noqa: E402

M_ROWS = 4096
#: The cases session 12's final run left below 1.0x (docs/benchmarks.md).
DEFAULT_CASES = ("layer_norm/float16/1024", "layer_norm/float32/2048",
                 "softmax/float32/8192")

# sm_90 (H100/H200) per-SM limits
_REGS_SM, _THREADS_SM, _BLOCKS_SM, _SMEM_SM, _SMEM_RESERVED = 65536, 2048, 32, 233472, 1024

#: The instruction classes, in print order: (name, predicate on the opcode with modifiers).
CLASSES: tuple[tuple[str, Any], ...] = (
    ("LDG", lambda op: op.startswith("LDG")),
    ("STG", lambda op: op.startswith("STG")),
    ("LDS", lambda op: op.startswith("LDS")),
    ("STS", lambda op: op.startswith("STS")),
    ("LDGSTS", lambda op: op.startswith("LDGSTS") or op.startswith("LDGDEPBAR")
     or op.startswith("DEPBAR")),
    ("SHFL", lambda op: op.startswith("SHFL")),
    ("BAR", lambda op: op.startswith("BAR")),
    ("MUFU", lambda op: op.startswith("MUFU")),
    ("FFMA", lambda op: op.startswith("FFMA")),
    ("FMUL", lambda op: op.startswith("FMUL")),
    ("FADD", lambda op: op.startswith("FADD")),
    ("FMNMX", lambda op: op.startswith("FMNMX")),
    ("FSEL/FSETP", lambda op: op.startswith(("FSEL", "FSETP", "FCHK"))),
    ("cvt", lambda op: op.startswith(("HADD2.F32", "F2FP", "F2F", "I2F", "F2I", "I2FP"))),
    ("int/addr", lambda op: op.startswith(("IMAD", "IADD", "LEA", "SHF", "LOP", "ISETP",
                                           "UIADD", "ULEA", "USHF", "ULOP", "IABS", "SEL",
                                           "PRMT", "UISETP", "UIMAD", "USEL", "VIADD",
                                           "IMNMX"))),
    ("const/sreg/mov", lambda op: op.startswith(("LDC", "ULDC", "S2R", "S2UR", "CS2R", "MOV",
                                                 "UMOV", "R2UR", "HFMA2.MMA", "CS2UR"))),
    ("control", lambda op: op.startswith(("BRA", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "CALL",
                                          "RET", "BMOV", "PLOP3", "NOP"))),
)

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*?);")


def _tool(name: str) -> str:
    """``cuobjdump`` / ``nvdisasm``: on PATH, beside nvcc, or in Triton's wheel."""
    found = shutil.which(name)
    if found:
        return found
    for d in (Path("/usr/local/cuda/bin"),):
        if (d / name).exists():
            return str(d / name)
    try:
        import triton

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if cand.exists():
            return str(cand)
    except ImportError:
        pass
    raise SystemExit(f"{name}: not found on PATH, in /usr/local/cuda/bin or in Triton's wheel")


Instr = tuple[int, str, str, str]  # address, predicate, opcode with modifiers, operands


def disassemble(cubin: bytes) -> tuple[list[Instr], dict[str, int]]:
    """The SASS of a one-kernel cubin as :data:`Instr` tuples (NOPs and the trailing
    self-branch dropped) and its resource usage (``REG``, ``SHARED``, ``LOCAL``,
    ``STACK`` bytes/registers by ``cuobjdump -res-usage``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        tool = _tool("cuobjdump")
        sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True,
                              check=True).stdout
        res = subprocess.run([tool, "-res-usage", str(path)], capture_output=True, text=True,
                             check=True).stdout
    instrs: list[Instr] = []
    for m in _LINE.finditer(sass):
        pred, op, rest = (m.group(2) or "").strip(), m.group(3), m.group(4).strip()
        if op == "NOP":
            continue
        instrs.append((int(m.group(1), 16), pred, op, rest))
    if instrs and instrs[-1][2] == "BRA" and instrs[-1][3] == f"0x{instrs[-1][0]:x}":
        instrs.pop()  # the self-loop after the last EXIT or RET
    usage = {k: int(v) for k, v in re.findall(r"(REG|SHARED|LOCAL|STACK):(\d+)", res)}
    return instrs, usage


def main_path(instrs: list[Instr]) -> tuple[list[Instr], int]:
    """The kernel body without its subroutines (from the first ``CALL`` target on: the
    slow paths of IEEE division, not run for ordinary operands), and how many
    instructions those subroutines hold."""
    targets = [int(t, 16) for _, _, op, rest in instrs if op.startswith("CALL")
               for t in re.findall(r"0x[0-9a-f]+", rest)[-1:]]
    if not targets:
        return instrs, 0
    first = min(targets)
    body = [i for i in instrs if i[0] < first]
    return body, len(instrs) - len(body)


def _width(op: str, default: int) -> int:
    """Bytes a global access moves a thread (``.128`` 16, ``.64`` 8, ``.U16`` 2...)."""
    for suffix, nbytes in ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1)):
        if suffix in op:
            return nbytes
    return default


def classify(instrs: list[Instr]) -> dict[str, Any]:
    """Counts by class (an opcode in none: ``other``), the detail of the memory and MUFU
    opcodes, the global bytes a thread loads and stores, and whether any branch goes
    backwards (a loop: the static counts are then not the dynamic ones)."""
    counts: collections.Counter[str] = collections.Counter()
    detail: collections.Counter[str] = collections.Counter()
    ld = st = 0
    loops = False
    for addr, _, op, rest in instrs:
        name = next((c for c, test in CLASSES if test(op)), "other")
        counts[name] += 1
        counts["total"] += 1
        if name in ("LDG", "STG", "MUFU", "LDS", "STS", "BAR", "cvt", "other", "LDGSTS"):
            detail[op] += 1
        if name == "LDG":
            ld += _width(op, 4)
        elif name == "STG":
            st += _width(op, 4)
        elif name == "LDGSTS":
            ld += _width(op, 4) if op.startswith("LDGSTS") else 0
        target = re.match(r"(?:.*\s)?(0x[0-9a-f]+)$", rest)
        if op.startswith("BRA") and target and int(target.group(1), 16) <= addr:
            loops = True
    return {"counts": counts, "detail": detail, "ld_bytes": ld, "st_bytes": st,
            "loops": loops}


def occupancy(regs: int, threads: int, smem: int) -> tuple[int, str]:
    """Blocks an SM by registers (allocated 256 a warp, per-thread count rounded up to 8),
    threads, the block limit and shared memory; and the limiter's name."""
    warps = threads // 32
    per_warp = -(-max(regs, 1) * 32 // 256) * 256
    by_regs = (_REGS_SM // per_warp) // warps
    by_threads = _THREADS_SM // threads
    by_smem = _SMEM_SM // (smem + _SMEM_RESERVED)
    lim = {"regs": by_regs, "threads": by_threads, "blocks": _BLOCKS_SM, "smem": by_smem}
    name = min(lim, key=lambda k: lim[k])
    return lim[name], name


def thork_kernel(op: str, dtype: Any, n: int, cfg: Any = None) -> tuple[bytes, dict[str, Any]]:
    """Thork's cubin for sm_90 and its launch shape (``cfg``: a RowConfig, default the
    LAYOUTS pick)."""
    cfg = cfg or (bl.softmax_config if op == "softmax" else bl.layer_norm_config)(dtype, n)
    make = bl.make_softmax if op == "softmax" else bl.make_layer_norm
    art = make(dtype, n, cfg).artifact("sm_90")
    return art.data, {"who": f"thork {cfg.tag()}", "threads": cfg.block,
                      "rows": cfg.rows_per_unit, "grid": cfg.grid(M_ROWS)}


def triton_kernel(op: str, dtype: Any, n: int) -> tuple[bytes, dict[str, Any]] | None:
    """Triton's cubin for sm_90 as bench_lang launches it (None without Triton)."""
    jitted = bl._triton_jit()
    if jitted is None:
        return None
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    softmax_rows, layer_norm_rows, warps = jitted
    ty = {"float16": "*fp16", "float32": "*fp32"}[dtype.name]
    div16 = [["tt.divisibility", 16]]
    if op == "softmax":
        fn, sig = softmax_rows, {"out_ptr": ty, "x_ptr": ty, "n_cols": "i32"}
    else:
        fn, sig = layer_norm_rows, {"out_ptr": ty, "x_ptr": ty, "w_ptr": ty, "b_ptr": ty,
                                    "n_cols": "i32", "eps": "fp32"}
    # the JIT's run-time specialisation: 16-byte-aligned pointers, n_cols % 16 == 0
    attrs = {(i,): div16 for i, k in enumerate(sig) if k != "eps"}
    sig["BLOCK"] = "constexpr"
    src = ASTSource(fn, sig, {"BLOCK": triton.next_power_of_2(n)}, attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": warps(n)})
    return k.asm["cubin"], {"who": f"triton w{warps(n)}", "threads": 32 * warps(n),
                            "rows": 1, "grid": M_ROWS}


def report(case: str, kernels: list[tuple[bytes, dict[str, Any]]], dump: Path | None
           ) -> list[dict[str, Any]]:
    op, dtname, n_s = case.split("/")
    n = int(n_s)
    itemsize = getattr(tk.dt, dtname).itemsize
    out = []
    for cubin, shape in kernels:
        instrs, usage = disassemble(cubin)
        body, sub = main_path(instrs)
        cls = classify(body)
        threads, rows = shape["threads"], shape["rows"]
        blocks, limiter = occupancy(usage.get("REG", 0), threads, usage.get("SHARED", 0))
        per_row = threads // 32 / rows  # warps a row
        row = {"case": case, **shape, "regs": usage.get("REG", 0),
               "smem": usage.get("SHARED", 0), "stack": usage.get("STACK", 0),
               "spills": sum(1 for i in body if i[2].startswith(("STL", "LDL"))),
               "blocks_sm": blocks, "limiter": limiter,
               "counts": dict(cls["counts"]), "detail": dict(cls["detail"]),
               "warp_instr_row": cls["counts"]["total"] * per_row,
               "ld_row": cls["ld_bytes"] * threads / rows,
               "st_row": cls["st_bytes"] * threads / rows,
               "row_bytes": n * itemsize, "loops": cls["loops"], "subroutines": sub,
               "resident_kib": blocks * rows * n * itemsize / 1024}
        out.append(row)
        if dump:
            dump.mkdir(parents=True, exist_ok=True)
            name = f"{case.replace('/', '_')}_{shape['who'].replace(' ', '_')}.sass"
            (dump / name).write_text("".join(f"/*{a:04x}*/ {p:8} {o} {r}\n"
                                             for a, p, o, r in instrs))
    return out


def print_case(rows: list[dict[str, Any]]) -> None:
    case = rows[0]["case"]
    print(f"\n== {case} (row {rows[0]['row_bytes']} B; M = {M_ROWS})")
    head = ["", *[r["who"] for r in rows]]
    lines = [
        ["threads/block, rows/block", *[f"{r['threads']}, {r['rows']}" for r in rows]],
        ["grid", *[str(r["grid"]) for r in rows]],
        ["registers (stack B; STL+LDL)", *[f"{r['regs']} ({r['stack']}; {r['spills']})"
                                           for r in rows]],
        ["static shared B", *[str(r["smem"]) for r in rows]],
        ["blocks/SM (limit)", *[f"{r['blocks_sm']} ({r['limiter']})" for r in rows]],
        ["global B read/row (x row)",
         *[f"{r['ld_row']:.0f} ({r['ld_row'] / r['row_bytes']:.2f})" for r in rows]],
        ["global B written/row", *[f"{r['st_row']:.0f}" for r in rows]],
        ["rows resident/SM, KiB", *[f"{r['resident_kib']:.0f}" for r in rows]],
        ["subroutine instrs (not counted)", *[str(r["subroutines"]) for r in rows]],
        ["warp instructions/row", *[f"{r['warp_instr_row']:.0f}"
                                    + (" (loop: static)" if r["loops"] else "")
                                    for r in rows]],
    ]
    names = [c for c, _ in CLASSES] + ["other", "total"]
    for c in names:
        if any(r["counts"].get(c) for r in rows):
            lines.append([f"{c} (static/thread)", *[str(r["counts"].get(c, 0)) for r in rows]])
    ops = sorted({k for r in rows for k in r["detail"]})
    for o in ops:
        lines.append([f"  {o}", *[str(r["detail"].get(o, 0)) for r in rows]])
    width = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head))]
    for x in [head, *lines]:
        print("  " + "  ".join(str(v).ljust(w) for v, w in zip(x, width)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(DEFAULT_CASES),
                    help="op/dtype/N,... (default: session 12's three shortfalls)")
    ap.add_argument("--cfg", action="append", default=[],
                    help="a RowConfig as JSON, compared beside the pick (repeatable)")
    ap.add_argument("--dump", type=Path, default=None, help="write each kernel's SASS here")
    ap.add_argument("--json", type=Path, default=None, help="write the counts here")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--fast", action="store_true",
                    help="also each pick with tk.fast math (RowConfig.fast=True, session 13)")
    opts = ap.parse_args()
    everything = []
    for case in [c for c in opts.only.split(",") if c]:
        op, dtname, n_s = case.split("/")
        dtype, n = getattr(tk.dt, dtname), int(n_s)
        kernels = [thork_kernel(op, dtype, n)]
        if opts.fast:
            pick = (bl.softmax_config if op == "softmax" else bl.layer_norm_config)(dtype, n)
            kernels.append(thork_kernel(op, dtype, n, pick._replace(fast=True)))
        kernels += [thork_kernel(op, dtype, n, bl.RowConfig(**json.loads(c)))
                    for c in opts.cfg]
        tri = None if opts.no_triton else triton_kernel(op, dtype, n)
        if tri is not None:
            kernels.append(tri)
        rows = report(case, kernels, opts.dump)
        print_case(rows)
        everything += rows
    if opts.json:
        opts.json.write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
