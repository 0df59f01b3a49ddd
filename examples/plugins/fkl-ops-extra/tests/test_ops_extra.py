"""fkl-ops-extra against NumPy references, installed, through the entry point (fresh
random odd-sized inputs, poisoned outputs)."""

from __future__ import annotations

import warnings

import fkl
import fkl_ops_extra
import numpy as np
import pytest
import thork_core

H, W = 37, 53


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print("rng seed:", seed)
    return np.random.default_rng(seed)


def run(*ops, x, out=None):
    return fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target="cpu")(x, out=out)


def poisoned(shape, dtype):
    dtype = np.dtype(dtype)
    fill = np.nan if dtype.kind == "f" else np.iinfo(dtype).max // 3
    return np.full(shape, fill, dtype)


def test_found_through_the_entry_point_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fkl.ops.Gamma is fkl_ops_extra.Gamma
        assert fkl.ops.LUT is fkl_ops_extra.LUT and fkl.Clamp is fkl_ops_extra.Clamp
    assert {"Gamma", "LUT", "Clamp"} <= set(fkl.ops.available())
    assert fkl.Gamma.identity() == "fkl_ops_extra._ops:Gamma@1"


@pytest.mark.parametrize("dtype,top", [(np.uint8, 255.0), (np.float32, 1.0)])
def test_gamma(rng, dtype, top):
    x = (rng.integers(0, 256, (H, W, 3)).astype(dtype) if dtype == np.uint8
         else rng.uniform(0, 1, (H, W, 3)).astype(dtype))
    g = float(rng.uniform(0.3, 2.5))
    out = poisoned((H, W, 3), np.float32)
    got = run(fkl.ops.Gamma(g, max_value=top), x=x, out=out)
    assert got is out
    ref = np.float32(top) * (x.astype(np.float32) / np.float32(top)) ** np.float32(g)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-5)
    # A new exponent is a runtime value: the same kernel, a new result.
    fkl.reset_stats()
    g2 = g + 0.5
    np.testing.assert_allclose(run(fkl.ops.Gamma(g2, max_value=top), x=x),
                               np.float32(top) * (x.astype(np.float32) / np.float32(top))
                               ** np.float32(g2), rtol=2e-5, atol=1e-5)
    assert fkl.stats()["builds"] == 0


@pytest.mark.parametrize("size", [64, 7])
def test_lut_matches_numpy_indexing(rng, size):
    x = rng.integers(0, 256, (H, W)).astype(np.uint8)
    table = rng.integers(0, 256, size).astype(np.uint8)
    out = poisoned((H, W), np.uint8)
    run(fkl.ops.LUT(table), x=x, out=out)
    np.testing.assert_array_equal(out, table[np.clip(x, 0, size - 1)])
    ftable = rng.standard_normal(size).astype(np.float32)
    np.testing.assert_array_equal(run(fkl.ops.LUT(ftable), x=x.astype(np.int32) - 3),
                                  ftable[np.clip(x.astype(np.int32) - 3, 0, size - 1)])


def test_clamp_keeps_dtype(rng):
    x = rng.integers(0, 256, (H, W, 3)).astype(np.uint8)
    lo, hi = sorted(int(v) for v in rng.integers(0, 256, 2))
    out = poisoned((H, W, 3), np.uint8)
    run(fkl.ops.Clamp(lo, hi), x=x, out=out)
    np.testing.assert_array_equal(out, np.clip(x, lo, hi))
    f = rng.standard_normal((H, W)).astype(np.float32)
    got = run(fkl.ops.Clamp(-0.5, 0.25), x=f)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.clip(f, np.float32(-0.5), np.float32(0.25)))


def test_fused_with_builtins(rng):
    x = rng.integers(0, 256, (H, W, 3)).astype(np.uint8)
    table = (np.arange(64)[::-1] * 4).astype(np.uint8)  # x >= 63 reads the last entry
    got = run(fkl.ops.LUT(table), fkl.Cast("float32"), fkl.ops.Gamma(0.5, 255.0),
              fkl.ops.Clamp(10.0, 200.0), x=x)
    ref = np.clip(np.float32(255) * (table[np.minimum(x, 63)].astype(np.float32) / np.float32(255))
                  ** np.float32(0.5), np.float32(10), np.float32(200))
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("make,match", [
    (lambda: fkl.ops.LUT([1]), "2 to 256 entries"),
    (lambda: fkl.ops.LUT(5), "sequence"),
    (lambda: fkl.ops.Clamp(3, 1), "lo .* above hi"),
    (lambda: fkl.ops.Gamma("x"), "gamma: expected a number"),
    (lambda: fkl.ops.Gamma(1.0, max_value=0), "max_value: expected a positive number"),
])
def test_bad_arguments_are_named(make, match):
    with pytest.raises(thork_core.ArgumentError, match=match):
        make()


def test_bad_pixels_are_named(rng):
    f = rng.standard_normal((H, W)).astype(np.float32)
    with pytest.raises(thork_core.ArgumentError, match="fkl.LUT: needs integer pixels"):
        run(fkl.ops.LUT([0, 1, 2]), x=f)
    with pytest.raises(thork_core.ArgumentError, match="integer bounds"):
        run(fkl.ops.Clamp(0.5, 3), x=f.astype(np.int16))
