"""Tuple forms over N sources (docs/fkl.md, "Tuple forms over N sources"): fkl.TupleRead(n)
reads n same-shape arrays and a value-less two-input op combines them as a left fold
``op(... op(op(s0, s1), s2) ..., s_{n-1})``, each step in C++ promotion.

References are NumPy folds written here, step by step in the promoted dtype; inputs are
fresh random arrays of odd sizes; outputs are poisoned.
"""

from __future__ import annotations

import functools

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array
from thork_core import ArgumentError

pytestmark = pytest.mark.plugin("compose")


def run(target: str, n: int, op: fkl.Op, *sources: np.ndarray, out=None, **kw):
    return fkl.compose(fkl.TupleRead(n, **kw), op, fkl.TensorWrite(), target=target)(
        *sources, out=out)


def c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++ integer division made total: truncation, a zero divisor gives 0, MIN / -1
    gives MIN (docs/guarantees.md)."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q = np.where(b64 == 0, 0, np.trunc(a64 / np.where(b64 == 0, 1, b64)))
    # int64 holds MIN / -1 = 2**31; the wrap to int32 gives MIN back.
    return q.astype(np.int64).astype(a.dtype)


FLOAT_REFS = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
    "Max": np.maximum, "Min": np.minimum, "AbsDiff": lambda a, b: np.abs(a - b),
}


def fold(fn, sources: list[np.ndarray], dtype) -> np.ndarray:
    """The left fold of ``fn`` with every step's operands in ``dtype`` (NumPy int32
    arithmetic on arrays wraps, as Thork's signed overflow does)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return functools.reduce(lambda acc, s: fn(acc, s.astype(dtype)).astype(dtype),
                                sources[1:], sources[0].astype(dtype))


@pytest.mark.parametrize("name", sorted(FLOAT_REFS))
@pytest.mark.parametrize("n,shape", [(3, (7, 13, 3)), (5, (11, 5)), (4, (1, 9, 2))])
def test_float_fold(target, rng, name, n, shape):
    srcs = [random_array(rng, shape, np.float32) for _ in range(n)]
    if name == "Div":  # keep divisors away from 0 so the float reference is well scaled
        srcs = [srcs[0]] + [np.where(np.abs(s) < 0.25, np.float32(0.5), s) for s in srcs[1:]]
    out = poisoned(shape, np.float32)
    got = run(target, n, getattr(fkl, name)(), *srcs, out=out)
    assert got is out
    want = fold(FLOAT_REFS[name], srcs, np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_fold_order_is_left_to_right(target):
    """Sub, Div and AbsDiff are not associative: other orders give other values."""
    def full(v: float) -> np.ndarray:
        return np.full((3, 5), v, np.float32)

    a, b, c = full(1.0), full(2.0), full(10.0)
    # left fold ||1 - 2| - 10| = 9; right fold |1 - |2 - 10|| = 7; |1 - 2 - 10| = 11
    np.testing.assert_array_equal(run(target, 3, fkl.AbsDiff(), a, b, c), full(9.0))
    # (1 - 2) - 10 = -11; 1 - (2 - 10) = 9
    np.testing.assert_array_equal(run(target, 3, fkl.Sub(), a, b, c), full(-11.0))
    # (10 / 2) / 4 = 1.25; 10 / (2 / 4) = 20
    np.testing.assert_array_equal(run(target, 3, fkl.Div(), c, b, full(4.0)), full(1.25))


@pytest.mark.parametrize("name", ["Add", "Sub", "Mul", "Max", "Min", "AbsDiff"])
def test_uint8_promotes_to_int32(target, rng, name):
    srcs = [random_array(rng, (9, 17, 3), np.uint8) for _ in range(4)]
    out = poisoned((9, 17, 3), np.int32)
    got = run(target, 4, getattr(fkl, name)(), *srcs, out=out)
    assert got is out and got.dtype == np.int32
    np.testing.assert_array_equal(out, fold(FLOAT_REFS[name], srcs, np.int32))


def test_uint8_product_of_five_wraps_in_int32(target):
    """255**5 exceeds int32: the running product wraps at each step (signed overflow
    wraps)."""
    srcs = [np.full((3, 7), 255, np.uint8) for _ in range(5)]
    got = run(target, 5, fkl.Mul(), *srcs)
    assert got.dtype == np.int32
    want = fold(np.multiply, srcs, np.int32)
    assert int(want[0, 0]) != 255**5  # the reference does wrap
    np.testing.assert_array_equal(got, want)


def test_integer_div_truncates_each_step(target, rng):
    shape = (5, 19)
    a = rng.integers(-1000, 1000, shape).astype(np.int32)
    b = rng.integers(-7, 8, shape).astype(np.int32)  # zeros included
    c = rng.integers(-5, 6, shape).astype(np.int32)
    a[0, :3] = np.iinfo(np.int32).min
    b[0, :3] = -1
    c[0, :3] = (1, -1, 0)
    got = run(target, 3, fkl.Div(), a, b, c)
    assert got.dtype == np.int32
    want = c_div(c_div(a, b), c)
    np.testing.assert_array_equal(got, want)
    assert got[0, 0] == np.iinfo(np.int32).min  # MIN / -1 / 1
    # The right fold a / (b / c) gives other values: the order is tested.
    assert not np.array_equal(want, c_div(a, c_div(b, c)))
    u = [random_array(rng, shape, np.uint8) for _ in range(3)]
    np.testing.assert_array_equal(run(target, 3, fkl.Div(), *u),
                                  c_div(c_div(u[0].astype(np.int32), u[1].astype(np.int32)),
                                        u[2].astype(np.int32)))


@pytest.mark.parametrize("name,fn", [("And", np.bitwise_and), ("Or", np.bitwise_or),
                                     ("Xor", np.bitwise_xor)])
def test_bitwise_fold_keeps_dtype(target, rng, name, fn):
    srcs = [random_array(rng, (7, 9), np.uint16) for _ in range(3)]
    got = run(target, 3, getattr(fkl, name)(), *srcs)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, functools.reduce(fn, srcs))


def test_batch_vector_and_in_place(target, rng):
    batch = [random_array(rng, (3, 5, 7, 4), np.float32) for _ in range(3)]
    np.testing.assert_allclose(run(target, 3, fkl.Max(), *batch, batch=True),
                               np.maximum(np.maximum(batch[0], batch[1]), batch[2]))
    vec = [random_array(rng, (37,), np.float32) for _ in range(6)]
    got = run(target, 6, fkl.Add(), *vec)
    assert got.shape == (37,)
    np.testing.assert_allclose(got, fold(np.add, vec, np.float32), rtol=1e-6)
    # out= one of the sources: each thread reads every source before it writes.
    srcs = [random_array(rng, (5, 11, 3), np.float32) for _ in range(3)]
    want = fold(np.subtract, srcs, np.float32)
    got = run(target, 3, fkl.Sub(), *srcs, out=srcs[1])
    assert got is srcs[1]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tuple_then_more_ops(target, rng):
    """The combined pixel flows on: a tuple AbsDiff, a compute op, a split write."""
    srcs = [random_array(rng, (7, 11, 3), np.uint8) for _ in range(3)]
    pipe = fkl.compose(fkl.TupleRead(3), fkl.Add(), fkl.Cast("float32"), fkl.Mul(0.5),
                       fkl.TensorSplit(), target=target)
    got = pipe(*srcs)
    want = (fold(np.add, srcs, np.int32).astype(np.float32) * np.float32(0.5))
    np.testing.assert_allclose(got, np.moveaxis(want, -1, 0))


@pytest.mark.parametrize("make,message", [
    (lambda: fkl.TupleRead(1), "an int from 2 to 16"),
    (lambda: fkl.TupleRead(17), "an int from 2 to 16"),
    (lambda: fkl.TupleRead(True), "an int from 2 to 16"),
    (lambda: fkl.TupleRead(2.0), "an int from 2 to 16"),
])
def test_bad_counts(make, message):
    with pytest.raises(ArgumentError, match=message):
        make()


def test_errors_name_what_is_wrong(rng):
    a = random_array(rng, (5, 7), np.float32)
    with pytest.raises(ArgumentError, match="combines exactly two sources, got a tuple of 3"):
        run("cpu", 3, fkl.Equal(), a, a, a)
    with pytest.raises(ArgumentError, match=r"source 2 is \(5, 6\) float32"):
        run("cpu", 3, fkl.Add(), a, a, a[:, :6].copy())
    with pytest.raises(ArgumentError, match="source 1 is .* float64"):
        run("cpu", 3, fkl.Add(), a, a.astype(np.float64), a)
    with pytest.raises(ArgumentError, match="reads 3 array"):
        run("cpu", 3, fkl.Add(), a, a)
    with pytest.raises(ArgumentError, match="dual-source read"):
        run("cpu", 3, fkl.Add(1.0), a, a, a)
    # A pair still compares with Equal; the fold never reaches Equal.
    b = a.copy()
    b[::2] += 1
    np.testing.assert_array_equal(run("cpu", 2, fkl.Equal(), a, b), a == b)


def test_strided_sources_are_read_in_place(target, rng):
    """Any of the N sources may be a view (a crop, every other column): each source gets
    its own strides; the fold matches NumPy on the views."""
    big = random_array(rng, (13, 23, 3), np.float32)
    a = big[2:11, 3:20]  # a crop: rows 23 pixels apart
    b = random_array(rng, (9, 17, 3), np.float32)
    c = random_array(rng, (9, 34, 3), np.float32)[:, ::2]  # every other pixel
    out = poisoned((9, 17, 3), np.float32)
    got = run(target, 3, fkl.Max(), a, b, c, out=out)
    np.testing.assert_array_equal(got, np.maximum(np.maximum(a, b), c))
    got = run(target, 4, fkl.Sub(), b, a, c, a)
    np.testing.assert_allclose(got, ((b - a) - c) - a, rtol=1e-6)


def test_kernel_identity_holds_the_count(rng):
    a = random_array(rng, (5, 7), np.float32)
    three = fkl.compose(fkl.TupleRead(3), fkl.Add(), fkl.TensorWrite(), target="cpu")
    four = fkl.compose(fkl.TupleRead(4), fkl.Add(), fkl.TensorWrite(), target="cpu")
    assert three.source([a] * 3) != four.source([a] * 4)
    assert fkl.TupleRead(3).key() != fkl.TupleRead(4).key()


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_tuple_kernels_compile_for_sm90(compiler):
    """The GPU kernels (the flat one the GPU prefers and the 2-D fallback) build to cubin
    without a GPU."""
    from helpers import has_plugin

    if not has_plugin(compiler):
        pytest.skip(f"the {compiler} plugin is not installed")
    for dtype, op in ((np.uint8, fkl.AbsDiff()), (np.float32, fkl.Div()),
                      (np.int32, fkl.Div())):
        srcs = [np.zeros((9, 23, 3), dtype)] * 4
        pipe = fkl.compose(fkl.TupleRead(4), op, fkl.TensorWrite(), target="gpu")
        for variant in (None, "grid"):
            art = pipe.artifact(srcs, arch="sm_90", compiler=compiler, variant=variant)
            assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", (dtype, op, variant)
