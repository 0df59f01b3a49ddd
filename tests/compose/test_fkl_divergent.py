"""fkl divergent horizontal fusion (compose_divergent) and CircularTensor, against NumPy,
with canaries around every output (FKL once wrote past the outputs: its issue #250)."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array
from helpers.fkl_refs import ref_resize

pytestmark = pytest.mark.plugin("compose")
F = np.float32


def close(a, b, rtol=1e-5, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


def chains():
    """Three chains of different geometries and output types, and NumPy references for
    one image each."""
    c0 = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5), fkl.TensorWrite())
    c1 = [fkl.TensorRead(), fkl.Resize(9, 7), fkl.Sub([1.0, 2.0, 3.0]), fkl.TensorSplit()]
    c2 = [fkl.TensorRead(), fkl.Crop((2, 3, 5, 4)), fkl.TensorWrite()]
    refs = [lambda im: im.astype(F) * F(0.5),
            lambda im: (ref_resize(im, 9, 7) - np.array([1, 2, 3], F)).transpose(2, 0, 1),
            lambda im: im[3:7, 2:7]]
    return [c0, c1, c2], refs


def test_divergent_planes_run_their_own_chain(target, rng):
    xs = random_array(rng, (7, 13, 17, 3), np.uint8)
    plane_map = [2, 0, 1, 1, 0, 2, 1]
    cs, refs = chains()
    div = fkl.compose_divergent(plane_map, *cs, target=target)
    outs = div(xs)
    assert len(outs) == 3
    for c in range(3):
        planes = div.planes(c)
        assert planes == [z for z, m in enumerate(plane_map) if m == c]
        assert outs[c].shape[0] == len(planes)
        for j, z in enumerate(planes):
            close(outs[c][j], refs[c](xs[z]))
    # Same plane count, new map: the kernel is reused.
    before = fkl.stats()["builds"]
    other = fkl.compose_divergent([0, 1, 2, 0, 1, 2, 0], *cs, target=target)
    got = other(list(xs))  # a list of images is a batch too
    for c in range(3):
        for j, z in enumerate(other.planes(c)):
            close(got[c][j], refs[c](xs[z]))
    assert fkl.stats()["builds"] == before


def test_plane_map_is_zero_based(target, rng):
    xs = random_array(rng, (1, 5, 6), np.float32)
    div = fkl.compose_divergent([0], [fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite()],
                                target=target)
    (out,) = div(xs)
    np.testing.assert_array_equal(out, xs * F(2.0))


SHAPES = [(2, 11, 14, 3), (2, 3, 7, 9), (2, 4, 5, 3)]  # the outputs for plane_map below
DTYPES = [F, F, np.uint8]
GUARD = 257  # poisoned elements before and after each output


def guarded(wrap):
    """Each output as a view into a poisoned buffer with GUARD elements on both sides:
    ``wrap(buffer, offset, shape, dtype)`` makes the view. Returns (buffers, outputs)."""
    bufs, outs = [], []
    for shape, d in zip(SHAPES, DTYPES):
        buf = poisoned(int(np.prod(shape)) + 2 * GUARD, d)
        b, o = wrap(buf, GUARD, shape, d)
        bufs.append(b)
        outs.append(o)
    return bufs, outs


def check_guards(hosts):
    for host, shape in zip(hosts, SHAPES):
        n = int(np.prod(shape))
        np.testing.assert_array_equal(host[:GUARD], poisoned(GUARD, host.dtype))
        np.testing.assert_array_equal(host[GUARD + n:], poisoned(GUARD, host.dtype))


def test_divergent_outputs_are_surrounded_by_canaries(target, rng):
    """Every output is a view into one poisoned buffer with guard bands before, between
    and after the outputs: after the call every guard is still poisoned."""
    if target == "gpu":
        pytest.skip("the device version is test_divergent_canaries_on_the_device")
    xs = random_array(rng, (6, 11, 14, 3), np.uint8)
    cs, refs = chains()
    plane_map = [1, 2, 0, 0, 2, 1]
    div = fkl.compose_divergent(plane_map, *cs, target=target)
    bufs, outs = guarded(lambda buf, off, shape, d: (
        buf, buf[off:off + int(np.prod(shape))].reshape(shape)))
    got = div(xs, out=outs)
    assert all(g is o for g, o in zip(got, outs))
    check_guards(bufs)
    for c in range(3):
        for j, z in enumerate(div.planes(c)):
            close(outs[c][j], refs[c](xs[z]))


@pytest.mark.gpu
def test_divergent_canaries_on_the_device(rng):
    xs = random_array(rng, (6, 11, 14, 3), np.uint8)
    cs, refs = chains()
    div = fkl.compose_divergent([1, 2, 0, 0, 2, 1], *cs, target="gpu")

    def wrap(buf, off, shape, d):
        dev = fkl.DeviceBuffer.from_host(buf)
        return dev, fkl.DeviceBuffer.wrap(dev.ptr + off * np.dtype(d).itemsize, shape, d,
                                          owner=dev)

    bufs, outs = guarded(wrap)
    div(fkl.DeviceBuffer.from_host(xs), out=outs)
    check_guards([b.to_host() for b in bufs])
    for c in range(3):
        res = outs[c].to_host()
        for j, z in enumerate(div.planes(c)):
            close(res[j], refs[c](xs[z]))


def test_divergent_errors_are_named(target, rng):
    cs, _ = chains()
    with pytest.raises(fkl.ArgumentError, match=r"plane_map\[2\] = 3: out of range for 3 "
                                                 r"chain\(s\); indices are 0-based, 0 to 2"):
        fkl.compose_divergent([0, 1, 3], *cs)
    with pytest.raises(fkl.ArgumentError, match=r"plane_map\[0\] = -1"):
        fkl.compose_divergent([-1, 1, 2], *cs)
    with pytest.raises(fkl.ArgumentError, match=r"plane_map\[1\]: expected an int"):
        fkl.compose_divergent([0, 1.5, 2], *cs)
    with pytest.raises(fkl.ArgumentError, match="chain 2 runs no plane"):
        fkl.compose_divergent([0, 1, 1], *cs)
    with pytest.raises(fkl.ArgumentError, match="at least one chain"):
        fkl.compose_divergent([0])
    with pytest.raises(fkl.ArgumentError, match="chain 1: expected a pipe"):
        fkl.compose_divergent([0, 1], cs[0], 3)
    div = fkl.compose_divergent([0, 1, 2], *cs, target=target)
    with pytest.raises(fkl.ArgumentError, match="batch of 3 images, got shape"):
        div(random_array(rng, (2, 13, 17, 3), np.uint8))


# -- CircularTensor -----------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["packed", "planar"])
@pytest.mark.parametrize("order", ["newest_first", "oldest_first"])
def test_circular_tensor_pin(target, layout, order):
    """B = 4, frame k filled with k, ops [Cast(float32), Div(255)]; after 6 updates
    NewestFirst plane z = (6 - z) / 255 (OldestFirst: the reverse)."""
    ct = fkl.CircularTensor(11, 7, batch=4, dtype="uint8", channels=3, layout=layout,
                            out_dtype="float32", order=order, target=target)
    for k in range(1, 7):
        ct.update(np.full((7, 11, 3), k, np.uint8), ops=[fkl.Cast("float32"), fkl.Div(255.0)])
    snap = ct.snapshot()
    snap = snap.to_host() if hasattr(snap, "to_host") else snap
    if layout == "planar":
        assert snap.shape == (12, 7, 11)
        planes = snap.reshape(4, 3, 7, 11)
    else:
        assert snap.shape == (4, 7, 11, 3)
        planes = snap
    for z in range(4):
        k = 6 - z if order == "newest_first" else 3 + z
        np.testing.assert_array_equal(planes[z], np.full(planes[z].shape, F(k) / F(255)))


def test_circular_tensor_random_frames_and_unfilled_planes(target, rng):
    ct = fkl.CircularTensor(13, 9, batch=5, dtype="uint8", channels=3, layout="planar",
                            out_dtype="float32", target=target, fill=-1.0)
    frames = [random_array(rng, (9, 13, 3), np.uint8) for _ in range(3)]
    ops = [fkl.Cast("float32"), fkl.Mul(1 / 255), fkl.Sub([0.5, 0.25, 0.125])]
    for f in frames:
        ct.update(f, ops=ops)
    snap = ct.snapshot()
    snap = (snap.to_host() if hasattr(snap, "to_host") else snap).reshape(5, 3, 9, 13)
    for z, f in enumerate(reversed(frames)):  # newest first
        ref = f.astype(F) * F(1 / 255) - np.array([0.5, 0.25, 0.125], F)
        close(snap[z], ref.transpose(2, 0, 1), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(snap[3:], np.full((2, 3, 9, 13), -1.0, F))


def test_circular_tensor_snapshot_is_zero_copy_on_the_cpu(rng):
    ct = fkl.CircularTensor(6, 5, batch=3, channels=1, target="cpu")
    ct.update(random_array(rng, (5, 6), np.uint8))
    a, b = ct.snapshot(), ct.snapshot()
    assert isinstance(a, np.ndarray) and np.shares_memory(a, b)


def test_circular_tensor_errors(target, rng):
    ct = fkl.CircularTensor(6, 5, batch=3, dtype="uint8", channels=3, out_dtype="float32",
                            target=target)
    with pytest.raises(fkl.ArgumentError, match=r"ops: they turn uint8x3 pixels into "
                                                 r"int32x3.*float32x3"):
        ct.update(random_array(rng, (5, 6, 3), np.uint8), ops=[fkl.Add(1)])
    with pytest.raises(fkl.ArgumentError, match=r"frame: expected shape \(5, 6, 3\) uint8"):
        ct.update(random_array(rng, (5, 7, 3), np.uint8), ops=[fkl.Cast("float32")])
    with pytest.raises(fkl.ArgumentError, match=r"ops\[0\]: expected a compute op"):
        ct.update(random_array(rng, (5, 6, 3), np.uint8), ops=[fkl.Resize(3, 3)])
    with pytest.raises(fkl.ArgumentError, match="layout: expected 'packed' or 'planar'"):
        fkl.CircularTensor(6, 5, batch=3, layout="chw")
    with pytest.raises(fkl.ArgumentError, match="order: expected"):
        fkl.CircularTensor(6, 5, batch=3, order="newest")
    with pytest.raises(fkl.ArgumentError, match="batch: expected a positive int"):
        fkl.CircularTensor(6, 5, batch=0)


@pytest.mark.gpu
def test_circular_tensor_on_the_device_is_zero_copy(rng):
    ct = fkl.CircularTensor(17, 9, batch=3, dtype="uint8", channels=3, layout="packed",
                            out_dtype="float32", target="gpu")
    frames = [random_array(rng, (9, 17, 3), np.uint8) for _ in range(4)]
    for i, f in enumerate(frames):  # host and device frames
        ct.update(f if i % 2 else fkl.DeviceBuffer.from_host(f), ops=[fkl.Cast("float32")])
    snap = ct.snapshot()
    assert snap.__cuda_array_interface__["data"][0] == ct.snapshot().ptr
    assert snap.__dlpack_device__()[0] == 2  # kDLCUDA
    host = snap.to_host()
    for z, f in enumerate(frames[::-1][:3]):
        np.testing.assert_array_equal(host[z], f.astype(F))


def test_divergent_hot_call_passes_what_the_general_path_passes(rng):
    """The steady-state path (DeviceArray batch and outs of the plan's exact shapes) hands
    the prepared launch the same addresses, in the same order, as the general path; any
    mismatch in the outs falls back to it. CPU-runnable: DeviceArray.wrap makes no driver
    call, and the plan's launcher is a recorder."""
    from thork_core.runtime import DeviceArray

    xs = random_array(rng, (6, 11, 14, 3), np.uint8)
    cs, _ = chains()
    div = fkl.compose_divergent([1, 2, 0, 0, 2, 1], *cs, target="cpu")
    div(xs)
    (key, plan), = div._plans.items()
    seen = []

    class Recorder:
        def launch(self, ptrs, handle):
            seen.append((list(ptrs), handle))

    plan.launcher = Recorder()
    div._plans[(key[0], key[1], "cuda", 0)] = plan
    x = DeviceArray.wrap(0x10000, xs.shape, "uint8")
    outs = [DeviceArray.wrap(0x20000 * (i + 1), s, d) for i, (s, d) in enumerate(plan.outs)]
    assert div(x, out=outs) == tuple(outs)
    hot = seen[-1]
    ptrs = [x.ptr if k < 0 else plan.table_ptrs[k] for k in plan.ins] + [o.ptr for o in outs]
    assert hot == (plan.arrange(ptrs), 0)
    n = len(seen)
    div._hot = lambda *a: None  # the general path, for comparison
    div(x, out=outs)
    assert seen[n:] == [hot]
    del div._hot
    wrong = [*outs[:-1], DeviceArray.wrap(0x90000, (1, 2), "float32")]
    with pytest.raises(fkl.ArgumentError, match="out"):
        div(x, out=wrong)  # not taken hot: the general path names the bad output


@pytest.mark.gpu
def test_divergent_repeated_calls_with_device_outs(rng):
    """Second and later calls with DeviceArray outs take the steady-state path: results
    still match NumPy on fresh inputs, with poisoned outputs each time."""
    cs, refs = chains()
    div = fkl.compose_divergent([1, 2, 0, 0, 2, 1], *cs, target="gpu")
    xs = random_array(rng, (6, 11, 14, 3), np.uint8)
    outs = list(div(fkl.DeviceBuffer.from_host(xs)))
    for _ in range(2):
        xs = random_array(rng, (6, 11, 14, 3), np.uint8)
        for o in outs:
            o.copy_from_host(poisoned(o.shape, o.dtype.numpy))
        div(fkl.DeviceBuffer.from_host(xs), out=outs)
        for c in range(3):
            res = outs[c].to_host()
            for j, z in enumerate(div.planes(c)):
                close(res[j], refs[c](xs[z]))
