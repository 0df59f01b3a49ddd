"""Property-based differential test: random expression trees over random dtypes, traced,
run on the CPU target and compared with a NumPy evaluation under the promotion rules of
docs/language.md (re-implemented here independently of thork_core.promote)."""

import numpy as np
import pytest
import thork as tk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
N = 37


def promote(a: str, b: str) -> str:
    """The documented table: C++ usual arithmetic conversions, CUDA's half rules."""
    fa, fb = a.startswith("float"), b.startswith("float")
    if fa or fb:
        if not fb:
            return a
        if not fa:
            return b
        return a if np.dtype(a).itemsize >= np.dtype(b).itemsize else b

    def widen(t):
        return "int32" if np.dtype(t).itemsize < 4 else t
    a, b = widen(a), widen(b)
    if a == b:
        return a
    sa, sb = a.startswith("int"), b.startswith("int")
    if sa == sb:
        return a if np.dtype(a).itemsize > np.dtype(b).itemsize else b
    u, s = (b, a) if sa else (a, b)
    if np.dtype(u).itemsize >= np.dtype(s).itemsize:
        return u
    return s


LEAVES = st.one_of(
    st.sampled_from([("x", 0), ("x", 1), ("x", 2)]),
    st.tuples(st.just("int"), st.integers(-5, 5)),
    st.tuples(st.just("float"), st.sampled_from([0.5, 1.5, -2.25, 3.0])),
)
BINOPS = ["add", "sub", "mul", "div", "min", "max", "and", "or", "xor"]


def is_literal(tree) -> bool:
    """Whether ``tree`` traces to a Python number (a literal, or minus one): two of them
    under one operator are computed by Python, not Thork (``1 / 0`` would raise)."""
    return tree[0] in ("int", "float") or (tree[0] == "neg" and is_literal(tree[1]))


def _extend(children):
    return st.one_of(
        st.tuples(st.sampled_from(BINOPS), children, children).filter(
            lambda t: not (is_literal(t[1]) and is_literal(t[2]))),
        st.tuples(st.just("neg"), children),
        st.tuples(st.just("where"), st.sampled_from(["lt", "gt", "eq"]), children, children,
                  children, children),
        st.tuples(st.just("cast"), st.sampled_from(INTS + FLOATS), children),
    )


TREES = st.recursive(LEAVES, _extend, max_leaves=7)


class Abort(Exception):
    """The tree needs an operation the rules leave undefined (e.g. bitwise on floats)."""


def evaluate(tree, leaf, binop, neg, where, cast, dtype_of):
    """Evaluate ``tree`` with the given primitive functions; values carry their dtype."""
    kind = tree[0]
    if kind in ("x", "int", "float"):
        return leaf(tree)
    if kind == "neg":
        return neg(evaluate(tree[1], leaf, binop, neg, where, cast, dtype_of))
    if kind == "cast":
        v = evaluate(tree[2], leaf, binop, neg, where, cast, dtype_of)
        if dtype_of(v).startswith("float") and not tree[1].startswith("float"):
            raise Abort  # float → int out of range is undefined in C++
        return cast(v, tree[1])
    if kind == "where":
        args = [evaluate(t, leaf, binop, neg, where, cast, dtype_of) for t in tree[2:]]
        return where(tree[1], *args)
    a = evaluate(tree[1], leaf, binop, neg, where, cast, dtype_of)
    b = evaluate(tree[2], leaf, binop, neg, where, cast, dtype_of)
    if kind in ("and", "or", "xor") and (dtype_of(a).startswith("float")
                                         or dtype_of(b).startswith("float")):
        raise Abort
    return binop(kind, a, b)


# -- NumPy: values are (array_or_scalar, dtype name, weak float literal?) -----------------------
def np_leaf(inputs):
    def leaf(t):
        if t[0] == "x":
            return inputs[t[1]], inputs[t[1]].dtype.name, False
        if t[0] == "int":
            return np.int32(t[1]), "int32", False
        return np.float32(t[1]), "float32", True
    return leaf


def np_binop(op, a, b):
    (va, ta, wa), (vb, tb, wb) = a, b
    if wa and tb.startswith("float"):
        ta = tb  # a float literal takes the other operand's float type
    if wb and ta.startswith("float"):
        tb = ta
    if op == "div" and not ta.startswith("float") and not tb.startswith("float"):
        t = "float32"
    else:
        t = promote(ta, tb)
    x, y = np.asarray(va).astype(t), np.asarray(vb).astype(t)
    with np.errstate(all="ignore"):
        r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
             "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
             "min": lambda p, q: np.where(q < p, q, p),
             "max": lambda p, q: np.where(p < q, q, p)}[op](x, y)
    return np.asarray(r).astype(t), t, False


def np_neg(a):
    v, t, w = a
    rt = t if t.startswith("float") else promote(t, t)
    with np.errstate(all="ignore"):
        return np.negative(np.asarray(v).astype(rt)), rt, w


def np_where(cmp, p, q, a, b):
    (vp, tp, _), (vq, tq, _) = p, q
    ct = promote(tp, tq)
    c = {"lt": np.less, "gt": np.greater, "eq": np.equal}[cmp](
        np.asarray(vp).astype(ct), np.asarray(vq).astype(ct))
    (va, ta, wa), (vb, tb, wb) = a, b
    if wa and tb.startswith("float"):
        ta = tb
    if wb and ta.startswith("float"):
        tb = ta
    t = ta if ta == tb else promote(ta, tb)
    return np.where(c, np.asarray(va).astype(t), np.asarray(vb).astype(t)), t, False


def np_cast(a, t):
    with np.errstate(all="ignore"):
        return np.asarray(a[0]).astype(t), t, False


# -- thork: the same tree, traced ------------------------------------------------------------
def tk_leaf(xs):
    def leaf(t):
        if t[0] == "x":
            return xs[t[1]]
        return t[1]  # Python literals: int → int32, float → weak float
    return leaf


def tk_binop(op, a, b):
    if op in ("min", "max"):
        return getattr(tk, op)(a, b)
    import operator
    return {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
            "div": operator.truediv, "and": operator.and_, "or": operator.or_,
            "xor": operator.xor}[op](tk.cast(a, tk.dt.int32) if isinstance(a, bool) else a, b)


def tk_dtype(v):
    if isinstance(v, float):
        return "float32"
    if isinstance(v, int):
        return "int32"
    return v.dtype.name


def tk_where(cmp, p, q, a, b):
    import operator
    c = {"lt": operator.lt, "gt": operator.gt, "eq": operator.eq}[cmp]
    pv = p if not isinstance(p, (int, float)) else tk.cast(p, tk_dtype(p))
    return tk.where(c(pv, q), a, b)


def tk_neg(a):
    # Negating a Python literal gives a literal: a float stays 'weak', as the model says.
    return -a


@pytest.mark.plugin("cpu")  # runs on the CPU target by name
# database=None: no example database, so a once-failing example is not replayed on every
# later run (and nothing is written to .hypothesis/); the seed comes from Hypothesis.
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck),
          database=None)
@given(tree=TREES, dtypes=st.lists(st.sampled_from(INTS + FLOATS), min_size=3, max_size=3),
       seed=st.integers(0, 2**32 - 1))
def test_random_expressions_match_numpy(tree, dtypes, seed):
    rng = np.random.default_rng(seed)
    inputs = []
    for t in dtypes:
        if t.startswith("float"):
            inputs.append(rng.integers(-16, 17, N).astype(t) / 4)  # exact in float16
        elif t.startswith("uint"):
            inputs.append(rng.integers(0, 10, N).astype(t))
        else:
            inputs.append(rng.integers(-9, 10, N).astype(t))
    try:
        ref, rtype, _ = evaluate(tree, np_leaf(inputs), np_binop, np_neg, np_where, np_cast,
                                 lambda v: v[1])
    except Abort:
        return
    ref = np.broadcast_to(np.asarray(ref).astype(rtype), (N,))
    out_t = getattr(tk.dt, rtype)

    def kernel(out, x0, x1, x2):
        i = tk.thread_idx().x
        xs = [x0[i], x1[i], x2[i]]
        out[i] = evaluate(tree, tk_leaf(xs), tk_binop, tk_neg, tk_where,
                          lambda v, t: tk.cast(v, t), tk_dtype)

    kernel.__annotations__ = {
        "out": tk.DevicePointer[out_t],
        **{f"x{k}": tk.DevicePointer[getattr(tk.dt, d)] for k, d in enumerate(dtypes)},
    }
    k = tk.jit(kernel, name="prop")
    # The traced expression has exactly the type the documented rules give.
    val = None

    def probe(out, x0, x1, x2):
        nonlocal val
        i = tk.thread_idx().x
        val = evaluate(tree, tk_leaf([x0[i], x1[i], x2[i]]), tk_binop, tk_neg, tk_where,
                       lambda v, t: tk.cast(v, t), tk_dtype)
    probe.__annotations__ = kernel.__annotations__
    tk.jit(probe, name="probe").ir
    assert tk_dtype(val) == rtype, (tree, dtypes)
    out = np.full(N, 99, rtype) if not rtype.startswith("float") else np.full(N, np.nan, rtype)
    k[1, N](out, *inputs, target="cpu")
    np.testing.assert_array_equal(out, ref, err_msg=f"{tree} {dtypes}")


def _binops(tree):
    if tree[0] in BINOPS:
        yield tree
    for child in tree[1:]:
        if isinstance(child, tuple):
            yield from _binops(child)


@settings(max_examples=400, deadline=None, database=None)
@given(tree=TREES)
def test_trees_never_put_two_python_literals_under_one_operator(tree):
    # Python would compute those itself ('1 / 0' raises before Thork sees it).
    for node in _binops(tree):
        assert not (is_literal(node[1]) and is_literal(node[2])), node
