"""bench_lang's softmax and layer-norm row kernels (issue 16) against NumPy float64: the
layouts the benchmark times (one or two block reductions, a warp or a block per row,
streaming or plain accesses), fresh random rows with a large mean, poisoned outputs."""

import sys
from pathlib import Path

import numpy as np
import pytest
import thork as tk
from helpers import TARGETS, poisoned

BENCH = Path(__file__).resolve().parents[2] / "bench"
if not (BENCH / "bench_lang.py").exists():
    pytest.skip("bench/bench_lang.py is not beside the tests", allow_module_level=True)
sys.path.insert(0, str(BENCH))
import bench_lang as bl  # noqa: E402

RC = bl.RowConfig


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _layer_norm_ref(x, w, b, eps):
    x = x.astype(np.float64)
    m = x.mean(1, keepdims=True)
    v = ((x - m) ** 2).mean(1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w.astype(np.float64) + b.astype(np.float64)


def _check(dtype, n, cfg, target, rng, m_rows, sms=2):
    npdt = np.dtype(dtype.name)
    # a large mean and spread: one-pass merges and exp scaling must not lose accuracy
    x = (rng.standard_normal((m_rows, n)) * 4 + 30).astype(npdt)
    w = (rng.random(n) + 0.5).astype(npdt)
    b = rng.standard_normal(n).astype(npdt)
    tol = 4e-3 if dtype == tk.dt.float16 else 2e-6  # fp16: the output's own rounding
    y = poisoned((m_rows, n), dtype.name)
    grid = cfg.grid(m_rows, sms)  # persistent layouts: few blocks, several rows each
    bl.make_softmax(dtype, n, cfg)[grid, cfg.block](y, x, m_rows, target=target)
    ref = _softmax_ref(x)
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * ref.max())
    y = poisoned((m_rows, n), dtype.name)
    bl.make_layer_norm(dtype, n, cfg)[grid, cfg.block](
        y, x, w, b, np.float32(1e-5), m_rows, target=target)
    ref = _layer_norm_ref(x, w, b, 1e-5)
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * 8)


CASES = [("float32", 1024, RC(64), 8), ("float32", 1024, RC(32, rows=4), 8),
         ("float16", 1024, RC(128, onepass=False, cache=None), 8),
         ("float32", 2048, RC(256), 8), ("float16", 2048, RC(64, cache=None), 8),
         # session 10 (h-lang2): weight/bias loads first, row groups of several warps,
         # batches of rows per group, persistent grids with the next rows prefetched
         # (10 and 12 rows on 3 blocks: uneven trip counts, the prefetch guard)
         ("float32", 1024, RC(128, early=True), 8),
         ("float32", 1024, RC(64, rows=2, early=True), 8),
         ("float16", 1024, RC(64, batch=2, onepass=False, early=True), 8),
         ("float32", 1024, RC(128, persist=1, early=True), 10),
         ("float16", 2048, RC(128, persist=2, onepass=False, cache=None), 10),
         ("float32", 2048, RC(64, rows=2, batch=2, persist=1, early=True), 12),
         # session 10 (h-soft): softmax fp16 4096's pick, two rows of 128 threads a block
         ("float16", 4096, RC(128, rows=2, onepass=False, cache=None), 6),
         # session 11 (diag_l2): L2 eviction priorities on the loads / stores, streaming
         # loads with plain stores
         ("float16", 2048, RC(128, cache=None, load_evict="first", store_evict="last"), 8),
         ("float32", 1024, RC(64, plain_stores=True, load_evict="first", persist=1), 10),
         # session 12 (h12-rows): persistent grids without prefetch (stages=1) and fed by
         # a cp.async ring in shared memory 1..3 units ahead (10-13 rows on 3 blocks:
         # uneven trip counts, copies past the last row skipped, slots reused)
         ("float16", 2048, RC(128, onepass=False, persist=2, stages=1), 10),
         ("float32", 1024, RC(64, persist=1, stages=2), 11),
         ("float16", 2048, RC(128, onepass=False, persist=2, stages=3), 13),
         ("float32", 1024, RC(32, rows=2, persist=1, stages=4, early=True), 12),
         ("float16", 1024, RC(32, rows=2, batch=2, persist=1, stages=2, cache=None), 12),
         # ... and the two LAYOUTS picks among them (softmax fp32 2048, layer norm fp32 1024)
         ("float32", 2048, bl.LAYOUTS[("softmax", "float32", 2048)], 14),
         ("float32", 1024, bl.LAYOUTS[("layer_norm", "float32", 1024)], 9),
         # session 13 (sass_rows): the two batch=2 picks, and the squared deviations summed
         # in multiply-add chains at 4 (one chain), 16 (two) and 32 (four) elements a row
         ("float16", 1024, bl.LAYOUTS[("layer_norm", "float16", 1024)], 10),
         ("float32", 2048, bl.LAYOUTS[("layer_norm", "float32", 2048)], 6),
         ("float32", 1024, RC(32, onepass=False, cache=None), 5),
         ("float16", 1024, RC(256, cache=None), 5),
         # session 13 (h13-fast): tk.fast math (ex2/rcp/rsqrt .approx.ftz), one- and
         # two-pass, batched, persistent, and three LAYOUTS picks with it
         ("float32", 1024, RC(64, fast=True), 8),
         ("float16", 2048, RC(128, onepass=False, cache=None, fast=True), 8),
         ("float32", 2048, RC(64, rows=2, batch=2, persist=1, early=True, fast=True), 12),
         ("float32", 8192, bl.LAYOUTS[("softmax", "float32", 8192)]._replace(fast=True), 4),
         ("float16", 1024, bl.LAYOUTS[("layer_norm", "float16", 1024)]._replace(fast=True),
          6),
         ("float32", 2048, bl.LAYOUTS[("layer_norm", "float32", 2048)]._replace(fast=True),
          6)]


@pytest.mark.parametrize("case", CASES, ids=[f"{d}-{n}-{c.tag()}" for d, n, c, _ in CASES])
def test_row_kernels_match_numpy(target, rng, case):
    name, n, cfg, m_rows = case
    _check(getattr(tk.dt, name), n, cfg, target, rng, m_rows=m_rows, sms=3)


@pytest.mark.gpu
@pytest.mark.parametrize("key", sorted(bl.LAYOUTS), ids=lambda k: "-".join(map(str, k)))
def test_bench_layouts_on_the_gpu(rng, key):
    """Every layout bench_lang times, at its size (both ops share the check)."""
    _op, name, n = key
    _check(getattr(tk.dt, name), n, bl.LAYOUTS[key], "gpu", rng, m_rows=64)


def test_layouts_are_valid():
    for (_op, name, n), cfg in [*bl.LAYOUTS.items(), *bl.SWEEP_BASES.items()]:
        bl._check_cfg(cfg, n, getattr(tk.dt, name).itemsize)
        assert cfg.grid(4096, sms=132) >= 132 or cfg.grid(4096) == 4096 // cfg.rows_per_unit
    with pytest.raises(ValueError, match="m_rows: expected a positive multiple of rows"):
        RC(64, rows=2, batch=2).grid(10)
    assert RC(64, persist=2).grid(4096, sms=132) == 264
    assert RC(64, rows=2, batch=2).grid(4096) == 1024
    with pytest.raises(ValueError, match="does not tile"):
        bl.make_softmax(tk.dt.float32, 1024, RC(96))
    with pytest.raises(ValueError, match="store_evict expected None, 'first', 'last', "
                                         "'normal' or 'unchanged', got 'evict_last'"):
        bl.make_softmax(tk.dt.float32, 1024, RC(64, store_evict="evict_last"))
    assert RC(64, cache="cs", plain_stores=True, load_evict="first").tag() == "t64_cs_ps_lf"
    assert RC(128, persist=16, stages=3, onepass=False).tag() == "t128p16s3_2p_cs"
    assert RC(512, onepass=False, cache=None, fast=True).tag() == "t512_2p_fast"
    with pytest.raises(ValueError, match="stages expected 0, or 1 to 8 with persist > 0, "
                                         "got stages=2, persist=0"):
        bl.make_softmax(tk.dt.float32, 1024, RC(64, stages=2))
    with pytest.raises(ValueError, match="4 slots of 1 rows of 16384 bytes exceed 48 KiB"):
        bl.make_softmax(tk.dt.float32, 4096, RC(256, persist=2, stages=4))


def test_sweep_variants_are_valid():
    """bench/diag_rows.py's session-12 layouts tile their rows and fit shared memory."""
    import diag_rows as dr

    for (op, name, n), cfgs in dr.VARIANTS.items():
        assert (op, name, n) in bl.LAYOUTS
        for cfg in cfgs:
            bl._check_cfg(cfg, n, getattr(tk.dt, name).itemsize)
            assert cfg.grid(4096, sms=132) == min(4096 // cfg.rows_per_unit,
                                                  132 * cfg.persist or 4096)


@pytest.mark.skipif("cpu" not in TARGETS, reason="no CPU target")
def test_twin_is_the_same_kernel_under_another_name(rng):
    """bench_lang's self-comparison anchor: the twin differs from the pick only by name,
    and computes the same rows."""
    cfg = RC(64, onepass=False, cache=None)
    a = bl.make_softmax(tk.dt.float32, 1024, cfg)
    b = bl.make_softmax(tk.dt.float32, 1024, cfg, twin=True)
    assert b.cuda_source.replace("_twin", "") == a.cuda_source
    assert b.cuda_source != a.cuda_source
    x = rng.standard_normal((5, 1024)).astype(np.float32)
    ya, yb = poisoned((5, 1024), "float32"), poisoned((5, 1024), "float32")
    a[5, 64](ya, x, 5, target="cpu")
    b[5, 64](yb, x, 5, target="cpu")
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_allclose(ya, _softmax_ref(x), rtol=2e-6, atol=2e-7)
    ln = bl.make_layer_norm(tk.dt.float16, 2048, RC(128), twin=True)
    assert "layer_norm_float16_2048_t128_cs_twin" in ln.cuda_source


def test_row_table_prints_the_self_comparison(capsys):
    row = {"op": "softmax", "dtype": "float16", "M": 4096, "N": 2048, "layout": "t128",
           "thork_TBps": 2.5, "triton_TBps": 2.4, "copy_TBps": 2.6, "correct": True,
           "self_triton": 0.97, "self_thork": 1.02}
    bl.print_row_table([row, {**row, "self_triton": 1.01, "self_thork": 0.995}])
    out = capsys.readouterr().out
    assert "self tri" in out and "   0.970    1.020 yes" in out
    assert "self-comparison (a kernel against its identical copy, same protocol): " \
           "0.970..1.020x over 4 pairs" in out


def test_sass_counts_classify_and_occupancy():
    """bench/sass_rows.py's counting (session 13): classes, widths, bytes, the slow-path
    subroutine left out, loops flagged, and blocks an SM by registers / threads / shared
    memory (sm_90)."""
    import sass_rows as sr

    sass = [(0x00, "", "LDG.E.128", "R4, desc[UR4][R2.64]"), (0x10, "@!P0", "LDG.E.64", "R8"),
            (0x20, "", "SHFL.BFLY", "PT, R1, R2, 0x1, 0x1f"),
            (0x30, "", "BAR.SYNC.DEFER_BLOCKING", "0x0"), (0x40, "", "MUFU.RSQ", "R1, R2"),
            (0x50, "", "HADD2.F32", "R1, -RZ, R4.H0_H0"), (0x60, "", "FFMA", "R1, R2, R3, R4"),
            (0x70, "", "CALL.REL.NOINC", "0xa0"), (0x80, "", "STG.E.128", "desc, R4"),
            (0x90, "", "EXIT", ""), (0xa0, "", "MUFU.RCP", "R5, R3"),
            (0xb0, "", "RET.REL.NODEC", "R4 0x0")]
    body, sub = sr.main_path(sass)
    assert sub == 2 and body[-1][2] == "EXIT"
    got = sr.classify(body)
    assert got["counts"]["LDG"] == 2 and got["counts"]["MUFU"] == 1
    assert got["counts"]["cvt"] == 1 and got["counts"]["total"] == 10
    assert got["ld_bytes"] == 24 and got["st_bytes"] == 16 and not got["loops"]
    assert sr.classify([(0x0, "", "FADD", "R1"), (0x10, "@P0", "BRA", "0x0")])["loops"]
    assert sr.occupancy(32, 128, 1536) == (16, "regs")
    assert sr.occupancy(40, 128, 1024) == (12, "regs")
    assert sr.occupancy(22, 256, 1280) == (8, "threads")
    assert sr.occupancy(32, 128, 40000) == (5, "smem")
