"""fkl horizontal fusion: batches of crops, batches of images and per-item values, against
NumPy (each batch item computed on its own by NumPy), on every target."""

from __future__ import annotations

import fkl
import numpy as np
import pytest
from helpers import poisoned, random_array
from helpers.fkl_refs import ref_resize, ref_warp

pytestmark = pytest.mark.plugin("compose")
F = np.float32


def close(a, b, rtol=1e-5, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


def rects_in(rng, n: int, sw: int, sh: int, w: int | None = None, h: int | None = None):
    """``n`` random rects inside a ``sw`` x ``sh`` image (of size ``w`` x ``h`` when given)."""
    out = []
    for _ in range(n):
        rw = w or int(rng.integers(1, sw + 1))
        rh = h or int(rng.integers(1, sh + 1))
        out.append((int(rng.integers(0, sw - rw + 1)), int(rng.integers(0, sh - rh + 1)),
                    rw, rh))
    return out


def crop(img, r):
    x, y, w, h = r
    return img[y:y + h, x:x + w]


# -- Crop ---------------------------------------------------------------------------------
def test_crop_takes_four_ints_as_opencv_users_write_it(target, rng):
    x = random_array(rng, (23, 31, 3), np.uint8)
    four = fkl.compose(fkl.TensorRead(), fkl.Crop(4, 6, 13, 9), fkl.TensorWrite(),
                       target=target)
    np.testing.assert_array_equal(four(x), x[6:15, 4:17])
    with pytest.raises(fkl.ArgumentError, match=r"fkl.Crop: expected a rect"):
        fkl.Crop(1, 2, 3)
    with pytest.raises(fkl.ArgumentError, match=r"fkl.Crop\(x, y, w, h\)"):
        fkl.Crop(1, 2, 3, 2.5)


def test_crop_batch_of_one_image_is_one_kernel(target, rng):
    x = random_array(rng, (41, 53, 3), np.uint8)
    rects = rects_in(rng, 5, 53, 41, w=13, h=7)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.TensorWrite(), target=target)
    for _ in range(3):  # the first call plans; later ones take the hot path (value table)
        x = random_array(rng, (41, 53, 3), np.uint8)
        out = poisoned((5, 7, 13, 3), np.uint8)
        assert pipe(x, out=out) is out
        np.testing.assert_array_equal(out, np.stack([crop(x, r) for r in rects]))
    # New rect values (same count) reuse the kernel; a new count compiles one more.
    before = fkl.stats()["builds"]
    rects2 = rects_in(rng, 5, 53, 41, w=13, h=7)
    again = fkl.compose(fkl.TensorRead(), fkl.Crop(rects2), fkl.TensorWrite(), target=target)
    np.testing.assert_array_equal(again(x), np.stack([crop(x, r) for r in rects2]))
    assert fkl.stats()["builds"] == before
    rects3 = rects_in(rng, 3, 53, 41, w=13, h=7)
    three = fkl.compose(fkl.TensorRead(), fkl.Crop(rects3), fkl.TensorWrite(), target=target)
    np.testing.assert_array_equal(three(x), np.stack([crop(x, r) for r in rects3]))
    assert fkl.stats()["builds"] == before + 1


def test_a_list_of_one_rect_still_has_a_batch_axis(target, rng):
    x = random_array(rng, (19, 21), np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop([(2, 3, 5, 4)]), fkl.TensorWrite(),
                       target=target)
    got = pipe(x)
    assert got.shape == (1, 4, 5)
    np.testing.assert_array_equal(got[0], x[3:7, 2:7])
    arr = fkl.compose(fkl.TensorRead(), fkl.Crop(np.array([[2, 3, 5, 4], [0, 0, 5, 4]])),
                      fkl.TensorWrite(), target=target)(x)
    np.testing.assert_array_equal(arr, np.stack([x[3:7, 2:7], x[0:4, 0:5]]))


def test_crops_of_different_sizes_resized_normalized_planar(target, rng):
    """The multi-ROI preprocessing case: crops of different sizes -> one size -> x/255 ->
    CHW float, one kernel; each plane checked against NumPy on its own crop."""
    x = random_array(rng, (67, 89, 3), np.uint8)
    rects = rects_in(rng, 6, 89, 67)
    rects[0] = (0, 0, 89, 67)  # the whole image, and a 1x1 crop
    rects[1] = (88, 66, 1, 1)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.Resize(11, 9), fkl.Mul(1 / 255),
                       fkl.TensorSplit(), target=target)
    out = poisoned((6, 3, 9, 11), np.float32)
    pipe(x, out=out)
    for k, r in enumerate(rects):
        ref = ref_resize(crop(x, r), 11, 9) * F(1 / 255)
        close(out[k], ref.transpose(2, 0, 1))


def test_crops_of_different_sizes_without_a_resize_are_a_named_error(target, rng):
    x = random_array(rng, (30, 30), np.uint8)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop([(0, 0, 5, 5), (1, 1, 6, 5)]), fkl.Mul(2),
                       fkl.TensorWrite(), target=target)
    with pytest.raises(fkl.ArgumentError, match=r"crops of different sizes \(5x5, 6x5\).*"
                                                 r"fkl.Resize"):
        pipe(x)
    after = fkl.compose(fkl.TensorRead(), fkl.Crop([(0, 0, 5, 5), (1, 1, 6, 5)]),
                        fkl.Crop((0, 0, 2, 2)), fkl.TensorWrite(), target=target)
    with pytest.raises(fkl.ArgumentError, match="only fkl.Resize or fkl.Warping"):
        after(x)
    boxed = fkl.compose(fkl.TensorRead(), fkl.Crop([(0, 0, 5, 5), (1, 1, 6, 5)]),
                        fkl.Resize(4, 4, aspect_ratio=fkl.PRESERVE_AR), fkl.TensorWrite(),
                        target=target)
    with pytest.raises(fkl.ArgumentError, match="letterboxed differently"):
        boxed(x)


def test_crop_batch_rect_errors_name_the_rect(target, rng):
    x = random_array(rng, (20, 30, 3), np.uint8)
    bad = fkl.compose(fkl.TensorRead(), fkl.Crop([(0, 0, 4, 4), (27, 0, 4, 4)]),
                      fkl.TensorWrite(), target=target)
    with pytest.raises(fkl.ArgumentError, match=r"rects\[1\] \(x=27.*outside the 30x20"):
        bad(x)
    with pytest.raises(fkl.ArgumentError, match=r"rects\[1\]: width and height"):
        fkl.Crop([(0, 0, 4, 4), (0, 0, 0, 4)])
    with pytest.raises(fkl.ArgumentError, match="at least one"):
        fkl.Crop([])
    batch = random_array(rng, (3, 20, 30, 3), np.uint8)
    two = fkl.compose(fkl.TensorRead(), fkl.Crop([(0, 0, 4, 4), (1, 1, 4, 4)]),
                      fkl.TensorWrite(), target=target)
    with pytest.raises(fkl.ArgumentError, match="2 crops of a batch of 3 images"):
        two(batch)


def test_crop_batch_over_an_image_batch_crops_each_image(target, rng):
    """Per-item rects: crop k of a batch of N images reads image k."""
    xs = random_array(rng, (4, 25, 33, 3), np.float32)
    rects = rects_in(rng, 4, 33, 25)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.Resize(7, 5), fkl.TensorWrite(),
                       target=target)
    got = pipe(xs)
    assert got.shape == (4, 5, 7, 3)
    for k, r in enumerate(rects):
        close(got[k], ref_resize(crop(xs[k], r), 7, 5))


def test_crop_batch_with_border_reader_reads_outside(target, rng):
    x = random_array(rng, (9, 11), np.float32)
    rects = [(-3, -2, 6, 5), (8, 6, 6, 5)]
    pipe = fkl.compose(fkl.TensorRead(), fkl.BorderReader(fkl.BorderMode.REFLECT_101),
                       fkl.Crop(rects), fkl.TensorWrite(), target=target)
    padded = np.pad(x, 8, mode="reflect")
    ref = np.stack([padded[8 + y:8 + y + h, 8 + cx:8 + cx + w] for cx, y, w, h in rects])
    np.testing.assert_array_equal(pipe(x), ref)


# -- image batches ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_image_batch_list_array_and_single_calls_agree(target, rng, dtype):
    imgs = [random_array(rng, (29, 37, 3), dtype) for _ in range(3)]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(13, 11), fkl.Mul(0.5), fkl.Sub(3.0),
                       fkl.TensorSplit(), target=target)
    from_list = pipe(imgs)
    assert from_list.shape == (3, 3, 11, 13) and from_list.dtype == np.float32
    from_array = pipe(np.stack(imgs))
    np.testing.assert_array_equal(from_list, from_array)
    for k, img in enumerate(imgs):
        ref = ref_resize(img, 13, 11) * F(0.5) - F(3.0)
        close(from_list[k], ref.transpose(2, 0, 1))
        np.testing.assert_array_equal(from_list[k], pipe(img))


def test_image_batch_of_different_sizes_is_a_named_error(target, rng):
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target=target)
    a = random_array(rng, (5, 7, 3), np.float32)
    with pytest.raises(fkl.ArgumentError, match=r"same-size images.*image 1 is \(5, 6, 3\)"):
        pipe([a, a[:, :6].copy()])
    with pytest.raises(fkl.ArgumentError, match="empty list"):
        pipe([])


# -- per-item values ----------------------------------------------------------------------
def test_per_item_values_of_binary_ops(target, rng):
    xs = random_array(rng, (3, 17, 19, 3), np.float32)
    mul = [0.5, 2.0, [1.0, -1.0, 3.0]]  # a number or one per channel, per item
    sub = [1.0, -2.0, 0.25]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(fkl.PerItem(mul)), fkl.Sub(fkl.PerItem(sub)),
                       fkl.Add([1.0, 2.0, 3.0]), fkl.TensorWrite(), target=target)
    out = poisoned(xs.shape, np.float32)
    pipe(xs, out=out)
    for k in range(3):
        ref = xs[k] * np.float32(mul[k]) - F(sub[k]) + np.array([1, 2, 3], F)
        close(out[k], ref, rtol=1e-6, atol=1e-6)
    before = fkl.stats()["builds"]
    other = fkl.compose(fkl.TensorRead(), fkl.Mul(fkl.PerItem([3.0, 1.0, [2.0, 2.0, 5.0]])),
                        fkl.Sub(fkl.PerItem([0.0, 0.5, 1.0])), fkl.Add([1.0, 2.0, 3.0]),
                        fkl.TensorWrite(), target=target)
    other(xs)
    assert fkl.stats()["builds"] == before  # new values, same kernel
    with pytest.raises(fkl.ArgumentError, match="3 per-item values for a batch of 2"):
        pipe(xs[:2].copy())


def test_per_item_values_after_a_crop_batch(target, rng):
    x = random_array(rng, (31, 43), np.uint8)
    rects = rects_in(rng, 4, 43, 31, w=9, h=6)
    scale = [1.0, 0.5, 0.25, 2.0]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.Cast("float32"),
                       fkl.Mul(fkl.PerItem(scale)), fkl.TensorWrite(), target=target)
    got = pipe(x)
    ref = np.stack([crop(x, r).astype(F) * F(s) for r, s in zip(rects, scale)])
    np.testing.assert_array_equal(got, ref)


def test_per_item_warp_matrices(target, rng):
    xs = random_array(rng, (2, 21, 27), np.float32)
    ms = [np.array([[1.1, 0.1, 2.0], [-0.05, 0.9, 1.0]]),
          np.array([[0.8, 0.0, 3.0], [0.0, 1.2, -2.0], [0.001, 0.002, 1.0]])[:2]]
    pipe = fkl.compose(fkl.TensorRead(batch=True), fkl.Warping(fkl.PerItem(ms), 17, 13),
                       fkl.TensorWrite(), target=target)
    got = pipe(xs)
    for k in range(2):
        close(got[k], ref_warp(xs[k], ms[k], 17, 13))
    with pytest.raises(fkl.ArgumentError, match=r"matrix\[1\]"):
        fkl.Warping(fkl.PerItem([ms[0], np.eye(2)]), 5, 5)


def test_per_item_letterbox_backgrounds(target, rng):
    xs = random_array(rng, (3, 10, 21, 2), np.float32)
    bgs = [[1.0, 2.0], -3.0, [5.0, 6.0]]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Resize(16, 15, aspect_ratio=fkl.PRESERVE_AR,
                                                    background=fkl.PerItem(bgs)),
                       fkl.TensorWrite(), target=target)
    got = pipe(xs)
    tw, th, x1, y1 = fkl.letterbox(21, 10, 16, 15, fkl.PRESERVE_AR)
    assert th < 15  # there is a border to fill
    for k in range(3):
        ref = np.empty((15, 16, 2), F)
        ref[...] = np.broadcast_to(np.asarray(bgs[k], F), (2,))
        ref[y1:y1 + th, x1:x1 + tw] = ref_resize(xs[k], tw, th)
        close(got[k], ref)


def test_per_item_border_constants_under_a_crop_batch(target, rng):
    x = random_array(rng, (9, 11), np.float32)
    rects = [(-2, -3, 6, 5), (8, 7, 6, 5)]
    consts = [7.0, -1.0]
    pipe = fkl.compose(fkl.TensorRead(),
                       fkl.BorderReader(fkl.BorderMode.CONSTANT, fkl.PerItem(consts)),
                       fkl.Crop(rects), fkl.TensorWrite(), target=target)
    got = pipe(x)
    for k, (cx, cy, w, h) in enumerate(rects):
        pad = np.pad(x, 8, constant_values=consts[k])
        np.testing.assert_array_equal(got[k], pad[8 + cy:8 + cy + h, 8 + cx:8 + cx + w])


def test_per_item_wrapper_errors():
    with pytest.raises(fkl.ArgumentError, match="one value per batch item, got none"):
        fkl.PerItem([])
    with pytest.raises(fkl.ArgumentError, match="fkl.PerItem: expected a sequence"):
        fkl.PerItem(3.0)


@pytest.mark.gpu
def test_crop_batch_and_per_item_values_with_device_arrays(rng):
    """Device arrays take the prepared launch with the value tables in device memory:
    out= given and allocating, several calls."""
    rects = rects_in(rng, 7, 61, 47, w=11, h=9)
    scale = [float(s) for s in rng.uniform(0.5, 2.0, 7)]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.Cast("float32"),
                       fkl.Mul(fkl.PerItem(scale)), fkl.TensorSplit(), target="gpu")
    for i in range(3):
        x = random_array(rng, (47, 61, 3), np.uint8)
        ref = np.stack([crop(x, r).astype(F).transpose(2, 0, 1) * F(s)
                        for r, s in zip(rects, scale)])
        dx = fkl.DeviceBuffer.from_host(x)
        if i % 2:
            got = pipe(dx).to_host()
        else:
            out = fkl.DeviceBuffer.from_host(poisoned((7, 3, 9, 11), np.float32))
            assert pipe(dx, out=out) is out
            got = out.to_host()
        np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
def test_device_image_list_is_stacked_on_the_device(rng):
    imgs = [random_array(rng, (15, 17, 3), np.uint8) for _ in range(3)]
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(2.0), fkl.TensorWrite(),
                       target="gpu")
    got = pipe([fkl.DeviceBuffer.from_host(i) for i in imgs])
    assert isinstance(got, fkl.DeviceBuffer) and got.shape == (3, 15, 17, 3)
    np.testing.assert_array_equal(got.to_host(), np.stack(imgs).astype(F) * F(2.0))


# -- active batch -------------------------------------------------------------------------
def test_active_batch_fills_the_rest_with_the_default(target, rng):
    xs = random_array(rng, (5, 11, 13, 3), np.uint8)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(fkl.PerItem(
        [1.0, 2.0, 3.0, 4.0, 5.0])), fkl.TensorSplit(), target=target)
    full = xs.astype(F).transpose(0, 3, 1, 2) * np.arange(1, 6, dtype=F)[:, None, None, None]
    builds = None
    for k, default in ((3, [-1.0, -2.0, -3.0]), (0, 7.5), (5, 0.0), (1, 2.0)):
        out = poisoned((5, 3, 11, 13), np.float32)
        assert pipe(xs, out=out, active_batch=k, default=default) is out
        ref = full.copy()
        ref[k:] = np.broadcast_to(np.asarray(default, F).reshape(-1, 1, 1), (3, 11, 13))
        np.testing.assert_array_equal(out, ref)
        if builds is None:
            builds = fkl.stats()["builds"]
    assert fkl.stats()["builds"] == builds  # k and the default are runtime values
    np.testing.assert_array_equal(pipe(xs), full)  # no active_batch: every item


def test_active_batch_over_a_crop_batch_and_its_errors(target, rng):
    x = random_array(rng, (21, 25), np.uint8)
    rects = rects_in(rng, 4, 25, 21, w=6, h=5)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Crop(rects), fkl.TensorWrite(), target=target)
    got = pipe(x, active_batch=2, default=255)
    ref = np.stack([crop(x, r) for r in rects])
    ref[2:] = 255
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(fkl.ArgumentError, match="active_batch: expected an int from 0 to the "
                                                "batch of 4, got 5"):
        pipe(x, active_batch=5)
    with pytest.raises(fkl.ArgumentError, match="does not fit the uint8"):
        pipe(x, active_batch=1, default=300)
    mid = fkl.compose(fkl.TensorRead(), fkl.MidWrite(), fkl.Mul(2), fkl.TensorWrite(),
                      target=target)
    with pytest.raises(fkl.ArgumentError, match="MidWrite"):
        mid(random_array(rng, (2, 5, 6), np.uint8), active_batch=1)
