"""fkl video formats: YUV reads and writes, YUV <-> RGB matrices, colour depth, pitched
frames. References are independent: frames are unpacked in NumPy from the byte layouts
of docs/fkl-video.md, and the matrices are built here from the published Kr/Kb (the RGB
to YUV definitions, inverted with NumPy), not from fkl's closed forms."""

from __future__ import annotations

from typing import Any

import cv2
import fkl
import numpy as np
import pytest
from helpers import has_plugin, poisoned
from helpers.yuv import FORMATS, pack, random_frame, unpack
from thork_core import ArgumentError

KRKB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593)}


def rgb_to_yuv_ref(standard: str, full: bool, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """``yuv = A @ rgb + off`` from the definitions (RGB on 0..M)."""
    kr, kb = KRKB[standard]
    kg = 1 - kr - kb
    m = 2.0**depth - 1
    s = 2.0 ** (depth - 8)
    yo, ys, co, cs = (0.0, m, 2.0 ** (depth - 1), m) if full else \
        (16 * s, 219 * s, 128 * s, 224 * s)
    luma = np.array([kr, kg, kb])
    pb = (np.array([0, 0, 1.0]) - luma) / (2 * (1 - kb))
    pr = (np.array([1.0, 0, 0]) - luma) / (2 * (1 - kr))
    a = np.stack([luma * ys, pb * cs, pr * cs]) / m
    return a, np.array([yo, co, co])


def yuv_to_rgb_ref(yuv: np.ndarray, standard: str, full: bool, depth: int) -> np.ndarray:
    a, off = rgb_to_yuv_ref(standard, full, depth)
    return (yuv[..., :3].astype(np.float64) - off) @ np.linalg.inv(a).T


def test_matrix_pins_from_kr_kb() -> None:
    """The published corner values: limited 8-bit white is Y 235, black 16, chroma 128;
    BT.601 red is (81.481, 90.203, 240); fkl's matrices are the inverse of the
    definitions for every standard, range and depth."""
    a, off = fkl.rgb_to_yuv_matrix("bt601", False, 8)
    assert np.allclose(np.array(a) @ [255, 0, 0] + off, [81.481, 90.2026, 240.0], atol=1e-3)
    assert np.allclose(np.array(a) @ [255, 255, 255] + off, [235, 128, 128])
    for std in KRKB:
        for full in (False, True):
            for depth in (8, 10, 12, 16):
                a, off = fkl.yuv_to_rgb_matrix(std, full, depth)
                ra, roff = rgb_to_yuv_ref(std, full, depth)
                assert np.allclose(np.array(a), np.linalg.inv(ra), rtol=1e-12, atol=1e-12)
                assert np.allclose(off, roff)
                fa, foff = fkl.rgb_to_yuv_matrix(std, full, depth)
                assert np.allclose(fa, ra) and np.allclose(foff, roff)
    # BT.709 full range 8-bit: R = Y + 1.5748 (V - 128), B = Y + 1.8556 (U - 128)
    a, _ = fkl.yuv_to_rgb_matrix("bt709", True, 8)
    assert np.isclose(a[0][2], 1.5748) and np.isclose(a[2][1], 1.8556)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_read_yuv_samples(fmt: str, target: str, rng: np.random.Generator) -> None:
    w, h = 14, 10 if FORMATS[fmt][3][1] == 2 else 7
    frame = random_frame(rng, fmt, w, h)
    pipe = fkl.compose(fkl.ReadYUV(fmt), fkl.TensorWrite(), target=target)
    ch = 4 if fmt == "Y416" else 3
    out = pipe(frame, out=poisoned((h, w, ch), FORMATS[fmt][0]))
    np.testing.assert_array_equal(out, unpack(fmt, frame, w, h))


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("std,full", [("bt601", False), ("bt709", True), ("bt2020", False)])
def test_read_yuv_to_rgb(fmt: str, std: str, full: bool, target: str,
                         rng: np.random.Generator) -> None:
    w, h = 10, 6
    depth = FORMATS[fmt][1]
    frame = random_frame(rng, fmt, w, h)
    pipe = fkl.compose(fkl.ReadYUV(fmt, to_rgb=std, full_range=full), fkl.TensorWrite(),
                       target=target)
    out = pipe(frame)
    assert out.dtype == np.float32 and out.shape == (h, w, 4 if fmt == "Y416" else 3)
    ref = yuv_to_rgb_ref(unpack(fmt, frame, w, h), std, full, depth)
    np.testing.assert_allclose(out[..., :3], ref, rtol=1e-5, atol=1e-5 * 2**depth)
    # the same through the separate op, with the depth given
    sep = fkl.compose(fkl.ReadYUV(fmt), fkl.YUV2RGB(std, full, depth), fkl.TensorWrite(),
                      target=target)(frame)
    np.testing.assert_allclose(sep, out, rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("fmt,code", [
    ("NV12", cv2.COLOR_YUV2RGB_NV12), ("NV21", cv2.COLOR_YUV2RGB_NV21),
    ("I420", cv2.COLOR_YUV2RGB_I420), ("YV12", cv2.COLOR_YUV2RGB_YV12),
    ("UYVY", cv2.COLOR_YUV2RGB_UYVY)])
def test_matches_opencv_bt601(fmt: str, code: int, target: str,
                              rng: np.random.Generator) -> None:
    """OpenCV's YUV -> RGB is BT.601 limited range in fixed point (and clamps Y - 16 at
    0), so the cross-check uses legal-range samples: Y 16..235, chroma 16..240."""
    w, h = 22, 12
    yuv = np.stack([rng.integers(16, 236, (h, w)), rng.integers(16, 241, (h, w)),
                    rng.integers(16, 241, (h, w))], -1).astype(np.float32)
    frame = fkl.compose(fkl.TensorRead(), fkl.WriteYUV(fmt), target=target)(yuv)
    ref = cv2.cvtColor(frame, code)
    pipe = fkl.compose(fkl.ReadYUV(fmt, to_rgb="bt601"), fkl.SaturateCast("uint8"),
                       fkl.TensorWrite(), target=target)
    out = pipe(frame, out=poisoned((h, w, 3), np.uint8))
    assert np.abs(out.astype(int) - ref).max() <= 1


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_write_yuv(fmt: str, target: str, rng: np.random.Generator) -> None:
    """Float samples (a little outside the range, some halves) -> frame: exact."""
    w, h = 18, 10 if FORMATS[fmt][3][1] == 2 else 5
    m = 2 ** FORMATS[fmt][1] - 1
    ch = 4 if fmt == "Y416" else 3
    yuv = (rng.integers(-4, 2 * m + 8, (h, w, ch)) / 2).astype(np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.WriteYUV(fmt), target=target)
    expect = pack(fmt, yuv)
    out = pipe(yuv, out=poisoned(expect.shape, expect.dtype))
    np.testing.assert_array_equal(out, expect)
    if fmt == "Y416":  # no alpha in the pixel: opaque
        out3 = pipe(np.ascontiguousarray(yuv[..., :3]))
        np.testing.assert_array_equal(out3, pack(fmt, yuv[..., :3]))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_read_write_round_trip(fmt: str, target: str, rng: np.random.Generator) -> None:
    w, h = 12, 8
    frame = random_frame(rng, fmt, w, h)
    shift = FORMATS[fmt][2]
    if shift:
        frame &= ~np.array((1 << shift) - 1, frame.dtype)
    # chroma replicated by the read, averaged back by the write: the same frame
    out = fkl.compose(fkl.ReadYUV(fmt), fkl.WriteYUV(fmt), target=target)(frame)
    np.testing.assert_array_equal(out, frame)


def test_rgb_to_nv12_chain(target: str, rng: np.random.Generator) -> None:
    """RGB uint8 -> RGB2YUV (BT.709 full) -> NV12, against the reference chain."""
    w, h = 16, 6
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    pipe = fkl.compose(fkl.TensorRead(), fkl.RGB2YUV("bt709", True), fkl.WriteYUV("NV12"),
                       target=target)
    a, off = rgb_to_yuv_ref("bt709", True, 8)
    yuv = rgb.astype(np.float64) @ a.T + off
    expect = pack("NV12", yuv)
    out = pipe(rgb)
    # float32 in the kernel vs float64 here: a sample on a .5 boundary may round apart
    assert np.abs(out.astype(int) - expect).max() <= 1
    assert (out != expect).mean() < 0.02


@pytest.mark.parametrize("fmt,shape,msg", [
    ("NV12", (10, 12), "3H/2"), ("NV12", (9, 13), "multiple of 2"),
    ("UYVY", (5, 7, 2), "width must be even"), ("P010", (9, 8), "uint16"),
    ("Y416", (4, 5, 3), "(H, W, 4)")])
def test_bad_frames(fmt: str, shape: tuple[int, ...], msg: str) -> None:
    dtype = np.uint8 if fmt in ("NV12", "UYVY", "P010") else np.uint16
    x = np.zeros(shape, dtype)
    pipe = fkl.compose(fkl.ReadYUV(fmt), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        pipe(x)


def test_bad_write_sizes_and_names() -> None:
    with pytest.raises(ArgumentError, match="multiple of 2"):
        fkl.compose(fkl.TensorRead(), fkl.WriteYUV("NV12"), target="cpu")(
            np.zeros((5, 6, 3), np.float32))
    with pytest.raises(ArgumentError, match="YUV format"):
        fkl.ReadYUV("NV16")
    with pytest.raises(ArgumentError, match="give to_rgb"):
        fkl.ReadYUV("NV12", full_range=True)
    with pytest.raises(ArgumentError, match="bt601"):
        fkl.YUV2RGB("bt999")
    with pytest.raises(ArgumentError, match="8, 10, 12 or 16"):
        fkl.NormalizePixel(9)
    with pytest.raises(ArgumentError, match="MidWrite"):
        fkl.compose(fkl.TensorRead(), fkl.MidWrite(), fkl.WriteYUV("NV12"), target="cpu")(
            np.zeros((4, 6, 3), np.float32))


@pytest.mark.parametrize("fmt", ["NV12", "P010", "P216", "UYVY", "Y210", "Y416"])
def test_pitched_frames(fmt: str, target: str, rng: np.random.Generator) -> None:
    """Frames with a row stride — a padded allocation, and a crop of a larger frame's
    columns — read in place, same result as the contiguous frame; a new pitch reuses the
    kernel (the pitch is a runtime value)."""
    w, h = 10, 6
    frame = random_frame(rng, fmt, w, h)
    pipe = fkl.compose(fkl.ReadYUV(fmt, to_rgb="bt709"), fkl.TensorWrite(), target=target)
    expect = pipe(frame)
    fkl.reset_stats()
    for pad in (6, 18):
        wide = frame.shape[1] + pad
        shape = (frame.shape[0], wide, *frame.shape[2:])
        buf = np.full(shape, 77, frame.dtype)
        buf[:, :frame.shape[1]] = frame
        view = buf[:, :frame.shape[1]]
        assert not view.flags.c_contiguous
        np.testing.assert_array_equal(pipe(view), expect)
    assert fkl.stats()["builds"] == 0  # no recompile per pitch
    # a view starting mid-row (an offset crop of columns)
    buf = np.full((frame.shape[0], frame.shape[1] + 8, *frame.shape[2:]), 5, frame.dtype)
    buf[:, 4:4 + frame.shape[1]] = frame
    np.testing.assert_array_equal(pipe(buf[:, 4:4 + frame.shape[1]]), expect)


def test_pitched_bad_strides_rejected() -> None:
    frame = np.zeros((12, 20), np.uint8)
    pipe = fkl.compose(fkl.ReadYUV("NV12"), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match="column stride"):
        pipe(frame[:, ::2])
    planar = fkl.compose(fkl.ReadYUV("I420"), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match="must be contiguous"):
        planar(np.zeros((12, 24), np.uint8)[:, :20])


def test_crop_resize_after_yuv(target: str, rng: np.random.Generator) -> None:
    """NV12 -> RGB fused with a crop: the crop reads the converted frame."""
    w, h = 20, 12
    frame = random_frame(rng, "NV12", w, h)
    rgb = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.TensorWrite(),
                      target=target)(frame)
    out = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.Crop((3, 2, 9, 7)),
                      fkl.TensorWrite(), target=target)(frame)
    np.testing.assert_array_equal(out, rgb[2:9, 3:12])
    rects = [(1, 2, 5, 4), (14, 7, 5, 4), (0, 0, 5, 4)]  # a batch of crops: z per crop
    crops = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.Crop(rects),
                        fkl.TensorWrite(), target=target)(frame)
    for i, (x, y, w_, h_) in enumerate(rects):
        np.testing.assert_array_equal(crops[i], rgb[y:y + h_, x:x + w_])


# -- colour depth -------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [8, 10, 12, 16])
def test_depth_ops(depth: int, target: str, rng: np.random.Generator) -> None:
    m = 2**depth - 1
    dtype = np.uint8 if depth == 8 else np.uint16
    x = rng.integers(0, 2**16 if depth > 8 else 256, (7, 9, 3)).astype(dtype)
    norm = fkl.compose(fkl.TensorRead(), fkl.SaturateDepth(depth), fkl.NormalizePixel(depth),
                       fkl.TensorWrite(), target=target)(x)
    np.testing.assert_allclose(norm, np.minimum(x, m).astype(np.float32) / np.float32(m),
                               rtol=1e-7)
    den = fkl.compose(fkl.TensorRead(), fkl.DenormalizePixel(depth), fkl.TensorWrite(),
                      target=target)(norm)
    np.testing.assert_allclose(den, np.minimum(x, m), rtol=1e-6)
    sat = fkl.compose(fkl.TensorRead(), fkl.SaturateDepth(depth), fkl.TensorWrite(),
                      target=target)(x)
    assert sat.dtype == dtype
    np.testing.assert_array_equal(sat, np.minimum(x, m))
    f = (rng.standard_normal((5, 7)) * m).astype(np.float32)
    fsat = fkl.compose(fkl.TensorRead(), fkl.SaturateDepth(depth), fkl.TensorWrite(),
                       target=target)(f)
    np.testing.assert_array_equal(fsat, np.clip(f, 0, m))
    alpha = fkl.compose(fkl.TensorRead(), fkl.AddOpaqueAlpha(depth), fkl.TensorWrite(),
                        target=target)(x)
    np.testing.assert_array_equal(alpha[..., :3], x)
    assert (alpha[..., 3] == m).all()
    assert fkl.ColorDepth.p10bit == 10


def test_opaque_alpha_normalized_and_errors(target: str) -> None:
    x = np.zeros((3, 5, 3), np.float32)
    out = fkl.compose(fkl.TensorRead(), fkl.AddOpaqueAlpha(10, normalized=True),
                      fkl.TensorWrite(), target=target)(x)
    assert (out[..., 3] == 1.0).all()
    with pytest.raises(ArgumentError, match="does not fit uint8"):
        fkl.compose(fkl.TensorRead(), fkl.AddOpaqueAlpha(10), fkl.TensorWrite(),
                    target="cpu")(np.zeros((3, 5, 3), np.uint8))


def test_p010_to_normalized_planar(target: str, rng: np.random.Generator) -> None:
    """The bench chain: P010 -> RGB (BT.2020) -> normalize 10-bit -> planar float."""
    w, h = 16, 10
    frame = random_frame(rng, "P010", w, h)
    pipe = fkl.compose(fkl.ReadYUV("P010", to_rgb="bt2020"), fkl.NormalizePixel(10),
                       fkl.TensorSplit(), target=target)
    out = pipe(frame, out=poisoned((3, h, w), np.float32))
    ref = yuv_to_rgb_ref(unpack("P010", frame, w, h), "bt2020", False, 10) / 1023
    np.testing.assert_allclose(out, ref.transpose(2, 0, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gpu_kernels_compile(fmt: str) -> None:
    """Every format's read (to RGB, normalized, planar) and write compiles to sm_90 cubin
    with NVRTC without a GPU (the kernels the GPU suite runs)."""
    pytest.importorskip("thork_nvrtc")
    frame = np.zeros(fkl.YUV_FORMATS[fmt].frame_shape(8, 4), FORMATS[fmt][0])
    read = fkl.compose(fkl.ReadYUV(fmt, to_rgb="bt709"), fkl.NormalizePixel(8),
                       fkl.TensorSplit(), target="gpu")
    art = read.artifact(frame, arch="sm_90", compiler="nvrtc")
    assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"
    write = fkl.compose(fkl.TensorRead(), fkl.RGB2YUV(), fkl.WriteYUV(fmt), target="gpu")
    art = write.artifact(np.zeros((4, 8, 3), np.uint8), arch="sm_90", compiler="nvrtc")
    assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"


# -- strided (pitched) inputs of TensorRead -----------------------------------------------
def _views(rng: np.random.Generator) -> list[np.ndarray]:
    big = random_array_f32(rng, (3, 21, 33, 4))
    return [big[0, 2:15, 3:20, :3],      # a crop view of RGB out of RGBA
            big[0, :, :, :3],             # RGB of RGBA (pixel stride 4)
            big[:, 1:9, 2:25],            # a batch of crops (plane and row strides)
            big[0, ::2, :, 1],            # every other row of one channel
            big[1, 3:10, 5:21, 0],        # a 2-D crop
            big[0, :, ::3, :2],           # every third column, 2 channels
            big[0].transpose(1, 0, 2)]    # a transposed image, read in place


def random_array_f32(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def test_strided_tensor_read(target: str, rng: np.random.Generator) -> None:
    """NumPy views (crops, slices, channel subsets, a transpose) read in place, element
    for element what the contiguous copy gives, through compute and geometry ops."""
    for x in _views(rng):
        assert not x.flags.c_contiguous
        pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                           target=target)
        out = pipe(x, out=poisoned(x.shape, np.float32))
        np.testing.assert_allclose(out, x * np.float32(2) + np.float32(1), rtol=1e-6)
        geo = fkl.compose(fkl.TensorRead(), fkl.Crop((1, 0, 5, 1)), fkl.Resize(7, 5),
                          fkl.TensorSplit(), target=target)
        np.testing.assert_allclose(geo(x), geo(np.ascontiguousarray(x)), rtol=1e-6)


def test_strided_read_one_kernel_per_form(target: str, rng: np.random.Generator) -> None:
    """The strides are runtime values: views of different pitches share one kernel."""
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(3.0), fkl.TensorWrite(), target=target)
    base = rng.integers(0, 255, (40, 64, 3)).astype(np.uint8)
    pipe(base[:10, :20])
    fkl.reset_stats()
    for _ in range(2):  # the second round takes the hot path (keyed by the strides)
        for x in (base[5:15, 7:27], base[::2, :20][:10], base[:10, ::3][:, :20]):
            np.testing.assert_array_equal(pipe(x), x.astype(np.uint8) * np.int32(3))
        base[...] = rng.integers(0, 255, base.shape)  # new data in the same views
    assert fkl.stats()["builds"] == 0


def test_strided_read_errors() -> None:
    pipe = fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target="cpu")
    x = np.zeros((6, 8, 3), np.float32)
    with pytest.raises(ArgumentError, match="channels are adjacent"):
        pipe(x[..., ::-1])
    with pytest.raises(ArgumentError, match="channels are adjacent"):
        pipe(x[:, ::-1])
    dual = fkl.compose(fkl.DualRead(), fkl.Add(), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match="DualRead input 1.*channels are adjacent"):
        dual(x[:, :4], x[:, :4, ::-1])
    pack = fkl.compose(fkl.TensorPack(), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match="TensorPack.*whole, positive"):
        pack(x.transpose(2, 0, 1)[:, ::-1])
    odd = np.lib.stride_tricks.as_strided(np.zeros(64, np.uint16), (3, 4, 5), (40, 10, 3))
    with pytest.raises(ArgumentError, match="whole, positive"):
        pack(odd)  # pixels 3 bytes apart: not a whole number of uint16 elements


@pytest.mark.gpu
def test_strided_device_views(rng: np.random.Generator) -> None:
    """CuPy and torch views on the device (a crop, a padded pitch) read in place."""
    cupy = pytest.importorskip("cupy")
    host = rng.integers(0, 256, (30, 48, 4)).astype(np.uint8)
    dev = cupy.asarray(host)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5),
                       fkl.TensorSplit(), target="gpu")
    for sl in ((slice(3, 20), slice(5, 40), slice(0, 3)), (slice(None), slice(None, 31),
                                                            slice(1, 2))):
        out = pipe(dev[sl])
        ref = host[sl].astype(np.float32).transpose(2, 0, 1) * 0.5
        np.testing.assert_allclose(cupy.asnumpy(cupy.asarray(out)), ref)
    frame = cupy.zeros((12 * 3 // 2, 64), cupy.uint8)
    frame[:, :20] = cupy.asarray(rng.integers(0, 256, (18, 20)).astype(np.uint8))
    yuv = fkl.compose(fkl.ReadYUV("NV12"), fkl.TensorWrite(), target="gpu")
    np.testing.assert_array_equal(
        cupy.asnumpy(cupy.asarray(yuv(frame[:, :20]))),
        fkl.compose(fkl.ReadYUV("NV12"), fkl.TensorWrite(), target="cpu")(
            cupy.asnumpy(frame[:, :20])))


def test_strided_out(target: str, rng: np.random.Generator) -> None:
    """``out=`` a view of a larger array (a crop, RGB of RGBA, a batch of crops) is written
    in place; everything around it keeps its poison; contiguous and strided calls mix."""
    x = rng.standard_normal((7, 9, 3)).astype(np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(0.5), fkl.TensorWrite(),
                       target=target)
    want = x * np.float32(2) + np.float32(0.5)
    for _ in range(2):  # the second round takes the hot path first
        big = poisoned((12, 15, 4), np.float32)
        canvas = big.copy()
        got = pipe(x, out=big[2:9, 3:12, :3])
        np.testing.assert_allclose(big[2:9, 3:12, :3], want, rtol=1e-6)
        assert got.base is not None
        canvas[2:9, 3:12, :3] = big[2:9, 3:12, :3]
        np.testing.assert_array_equal(big.view(np.uint32), canvas.view(np.uint32))
        np.testing.assert_allclose(pipe(x, out=poisoned((7, 9, 3), np.float32)), want,
                                   rtol=1e-6)
    # strided in and out, a batch; u8 with a 1-channel output
    xb = rng.standard_normal((3, 8, 10, 4)).astype(np.float32)[:, 1:7, 2:9]
    ob = poisoned((3, 9, 12, 4), np.float32)
    pipe(xb, out=ob[:, 2:8, 1:8])
    np.testing.assert_allclose(ob[:, 2:8, 1:8], xb * np.float32(2) + np.float32(0.5),
                               rtol=1e-6)
    gray = fkl.compose(fkl.TensorRead(), fkl.ColorConversion("RGB2GRAY"), fkl.TensorWrite(),
                       target=target)
    img = rng.integers(0, 256, (5, 11, 3)).astype(np.uint8)
    canvas = np.full((9, 20), 7, np.uint8)
    gray(img, out=canvas[2:7, 4:15])
    np.testing.assert_array_equal(canvas[2:7, 4:15], gray(img))
    assert (canvas[:2] == 7).all() and (canvas[:, :4] == 7).all() and (canvas[:, 15:] == 7).all()


def test_strided_out_errors() -> None:
    x = np.zeros((7, 9, 3), np.float32)
    split = fkl.compose(fkl.TensorRead(), fkl.TensorSplit(), target="cpu")
    with pytest.raises(ArgumentError, match="whole, positive"):
        split(x, out=np.zeros((3, 7, 9), np.float32)[:, :, ::-1])
    with pytest.raises(ArgumentError, match="expected shape"):
        split(x, out=np.zeros((3, 7, 12), np.float32)[:, :, :8])
    write = fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target="cpu")
    with pytest.raises(ArgumentError, match="channels are adjacent"):
        write(x, out=np.zeros((7, 9, 6), np.float32)[..., ::2])


def test_strided_kernels_compile_for_gpu() -> None:
    """The strided forms (input, output, both) compile to sm_90 cubin without a GPU."""
    pytest.importorskip("thork_nvrtc")
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    x = np.zeros((6, 8, 3), np.uint8)
    for variant in ("pitched", "pitched-out", "pitched-both"):
        art = pipe.artifact(x, arch="sm_90", compiler="nvrtc", variant=variant)
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"
        assert pipe.lowered(pipe._pixtype(x, None, 1), variant).ir.params


def test_pitched_buffer_checks() -> None:
    """Bad shapes and pitches are errors before any allocation (no GPU needed)."""
    with pytest.raises(ArgumentError, match="at least the row's 60 bytes"):
        fkl.PitchedBuffer((4, 20, 3), "uint8", pitch=48)
    with pytest.raises(ArgumentError, match="whole number of uint16 elements"):
        fkl.PitchedBuffer((4, 20), "uint16", pitch=81)
    with pytest.raises(ArgumentError, match="shape"):
        fkl.PitchedBuffer((4,), "uint8")


@pytest.mark.gpu
def test_pitched_buffer_in_and_out(rng: np.random.Generator) -> None:
    """A PitchedBuffer (rows 512 bytes apart) is read and written in place: HWC u8 in,
    float out, an NV12 frame in, and a batch; values against NumPy."""
    img = rng.integers(0, 256, (37, 45, 3)).astype(np.uint8)
    src = fkl.PitchedBuffer.from_host(img)
    assert src.pitch == 512 and src.strides == (512, 3, 1)
    np.testing.assert_array_equal(src.to_host(), img)
    dst = fkl.PitchedBuffer((37, 45, 3), "float32", pitch=45 * 12 + 64)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(0.5),
                       fkl.TensorWrite(), target="gpu")
    pipe(src, out=dst)
    np.testing.assert_array_equal(dst.to_host(), img.astype(np.float32) * 0.5)
    frame = rng.integers(0, 256, (24, 30)).astype(np.uint8)
    nv12 = fkl.PitchedBuffer.from_host(frame)
    yuv = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.TensorWrite(), target="gpu")
    ref = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.TensorWrite(),
                      target="cpu")(frame)
    np.testing.assert_allclose(yuv(nv12).to_host(), ref, rtol=1e-5, atol=1e-3)
    batch = rng.integers(0, 256, (3, 9, 20)).astype(np.uint8)
    pb = fkl.PitchedBuffer.from_host(batch, pitch=64)
    out = fkl.compose(fkl.TensorRead(batch=True), fkl.Add(1), fkl.TensorWrite(),
                      target="gpu")(pb)
    np.testing.assert_array_equal(out.to_host(), batch.astype(np.int32) + 1)


def test_depth_kernels_compile_for_gpu() -> None:
    """The colour-depth ops on uint16 and float32 pixels compile to sm_90 cubin."""
    pytest.importorskip("thork_nvrtc")
    for dtype, ops in ((np.uint16, [fkl.SaturateDepth(10), fkl.AddOpaqueAlpha(10),
                                    fkl.NormalizePixel(10)]),
                       (np.float32, [fkl.SaturateDepth(12), fkl.DenormalizePixel(12),
                                     fkl.AddOpaqueAlpha(12)])):
        pipe = fkl.compose(fkl.TensorRead(), *ops, fkl.TensorWrite(), target="gpu")
        art = pipe.artifact(np.zeros((4, 8, 3), dtype), arch="sm_90", compiler="nvrtc")
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"


def test_strided_span_beyond_int32_is_an_error() -> None:
    base = np.zeros(16, np.uint8)
    huge = np.lib.stride_tricks.as_strided(base, shape=(3, 4), strides=(2**30, 1))
    with pytest.raises(ArgumentError, match="fewer than 2\\*\\*31"):
        fkl.compose(fkl.TensorRead(), fkl.TensorWrite(), target="cpu")(huge)
    frame = np.lib.stride_tricks.as_strided(base, shape=(6, 4), strides=(2**29, 1))
    with pytest.raises(ArgumentError, match="fewer than 2\\*\\*31"):
        fkl.compose(fkl.ReadYUV("NV12"), fkl.TensorWrite(), target="cpu")(frame)


# -- strided planar reads and writes, DualRead, WriteYUV -----------------------------------
def _outside_kept(big: np.ndarray, before: np.ndarray, inside: tuple[Any, ...]) -> None:
    """Everything of ``big`` outside ``big[inside]`` is bit for bit what it was."""
    after = big.copy()
    after[inside] = before[inside]
    np.testing.assert_array_equal(after.view(np.uint8), before.view(np.uint8))


def test_strided_tensor_pack(target: str, rng: np.random.Generator) -> None:
    """Planar views — a crop of every plane, a subset of the planes, every other plane, a
    batch of crops, channel-major batches — read in place, against NumPy."""
    big = rng.standard_normal((2, 5, 19, 23)).astype(np.float32)
    chw = [big[0, 1:4, 2:15, 3:20], big[1, ::2, :, 1:22], big[0, :3, ::2, ::3],
           big[1, 4:5, 3:10, 2:9]]
    pipe = fkl.compose(fkl.TensorPack(), fkl.Mul(2.0), fkl.Add(1.0), fkl.TensorWrite(),
                       target=target)
    for x in chw:
        assert not x.flags.c_contiguous
        want = (x * np.float32(2) + np.float32(1)).transpose(1, 2, 0)
        out = pipe(x, out=poisoned(want.shape if x.shape[0] > 1 else want.shape[:2],
                                   np.float32))
        np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-6)
    batch = big[:, 1:4, 2:13, 5:16]  # (B, C, H, W) crops
    np.testing.assert_allclose(pipe(batch), (batch * np.float32(2) + np.float32(1))
                               .transpose(0, 2, 3, 1), rtol=1e-6)
    tpack = fkl.compose(fkl.TensorTPack(), fkl.Sub(0.25), fkl.TensorWrite(), target=target)
    cb = big.transpose(1, 0, 2, 3)[1:4, :, 3:12, 1:20]  # (C, B, H, W) view
    np.testing.assert_allclose(tpack(cb), (cb - np.float32(0.25)).transpose(1, 2, 3, 0),
                               rtol=1e-6)
    geo = fkl.compose(fkl.TensorPack(), fkl.Resize(7, 5), fkl.TensorSplit(), target=target)
    np.testing.assert_allclose(geo(chw[0]), geo(np.ascontiguousarray(chw[0])), rtol=1e-6)


def test_strided_tensor_split_out(target: str, rng: np.random.Generator) -> None:
    """TensorSplit / TensorTSplit into a view of a poisoned larger array: the view gets
    the planes, everything around it keeps its poison; strided in and out together; new
    strides reuse the kernel."""
    x = rng.standard_normal((9, 13, 3)).astype(np.float32)
    want = (x * np.float32(2) + np.float32(0.5)).transpose(2, 0, 1)
    split = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.Add(0.5), fkl.TensorSplit(),
                        target=target)
    for rnd in range(2):  # the second round starts on the hot path
        if rnd:
            fkl.reset_stats()
        for big, inside in ((poisoned((4, 12, 17), np.float32), np.s_[1:, 2:11, 3:16]),
                            (poisoned((3, 10, 30), np.float32), np.s_[:, :9, 1:27:2]),
                            (poisoned((6, 9, 13), np.float32), np.s_[::2])):
            before = big.copy()
            got = split(x, out=big[inside])
            assert got.base is not None
            np.testing.assert_allclose(big[inside], want, rtol=1e-6)
            _outside_kept(big, before, inside)
        if rnd:
            assert fkl.stats()["builds"] == 0
    xb = rng.standard_normal((2, 11, 7, 4)).astype(np.float32)[:, 1:10, 2:7, :3]
    bsplit = fkl.compose(fkl.TensorRead(), fkl.Sub(1.0), fkl.TensorSplit(), target=target)
    big = poisoned((2, 3, 10, 9), np.float32)
    before = big.copy()
    bsplit(xb, out=big[:, :, 1:, 2:7])  # strided in (crops) and out
    np.testing.assert_allclose(big[:, :, 1:, 2:7], (xb - np.float32(1)).transpose(0, 3, 1, 2),
                               rtol=1e-6)
    _outside_kept(big, before, np.s_[:, :, 1:, 2:7])
    tsplit = fkl.compose(fkl.TensorRead(), fkl.Sub(1.0), fkl.TensorTSplit(), target=target)
    big = poisoned((5, 2, 11, 6), np.float32)
    before = big.copy()
    tsplit(xb, out=big[1:4, :, :9, 1:6])
    np.testing.assert_allclose(big[1:4, :, :9, 1:6], (xb - np.float32(1)).transpose(3, 0, 1, 2),
                               rtol=1e-6)
    _outside_kept(big, before, np.s_[1:4, :, :9, 1:6])
    # planar in, planar out, both strided (a padded u8 canvas)
    planes = rng.integers(0, 256, (3, 15, 21)).astype(np.uint8)[:, 2:13, 1:20]
    canvas = np.full((3, 12, 32), 7, np.uint8)
    fkl.compose(fkl.TensorPack(), fkl.TensorSplit(), target=target)(
        planes, out=canvas[:, 1:12, 4:23])
    np.testing.assert_array_equal(canvas[:, 1:12, 4:23], planes)
    assert (canvas[:, 0] == 7).all() and (canvas[:, :, :4] == 7).all() \
        and (canvas[:, :, 23:] == 7).all()


def test_strided_dual_read(target: str, rng: np.random.Generator) -> None:
    """DualRead of views with different strides (a crop and RGB of RGBA), or one view and
    one contiguous array, in place, against NumPy; into a strided out too."""
    a_big = rng.standard_normal((13, 21, 3)).astype(np.float32)
    b_big = rng.standard_normal((9, 17, 4)).astype(np.float32)
    a, b = a_big[2:9, 3:16], b_big[1:8, 2:15, :3]
    sub = fkl.compose(fkl.DualRead(), fkl.Sub(), fkl.TensorWrite(), target=target)
    for _ in range(2):  # the second round takes the hot path
        np.testing.assert_allclose(sub(a, b), a - b, rtol=1e-6)
        np.testing.assert_allclose(sub(a, np.ascontiguousarray(b)), a - b, rtol=1e-6)
        np.testing.assert_allclose(sub(np.ascontiguousarray(a), b), a - b, rtol=1e-6)
    canvas = poisoned((10, 20, 3), np.float32)
    before = canvas.copy()
    sub(a, b, out=canvas[1:8, 4:17])
    np.testing.assert_allclose(canvas[1:8, 4:17], a - b, rtol=1e-6)
    _outside_kept(canvas, before, np.s_[1:8, 4:17])
    ia = rng.integers(0, 256, (3, 11, 15)).astype(np.uint8)
    ib = rng.integers(0, 256, (3, 12, 16)).astype(np.uint8)
    mx = fkl.compose(fkl.DualRead(batch=True), fkl.Max(), fkl.TensorWrite(), target=target)
    np.testing.assert_array_equal(mx(ia[:, 1:10, ::2], ib[:, 2:11, 1::2]),
                                  np.maximum(ia[:, 1:10, ::2], ib[:, 2:11, 1::2]))


SEMI_PACKED = ["NV12", "NV21", "P010", "P016", "P210", "P216", "UYVY", "Y210", "Y216",
               "Y416"]


@pytest.mark.parametrize("fmt", SEMI_PACKED)
def test_write_yuv_pitched_out(fmt: str, target: str, rng: np.random.Generator) -> None:
    """WriteYUV into a pitched frame (a padded allocation; a crop of a wider frame starting
    mid-row): the frame is the NumPy reference, the padding keeps its poison, and a new
    pitch reuses the kernel."""
    w, h = 14, 10 if FORMATS[fmt][3][1] == 2 else 7
    m = 2 ** FORMATS[fmt][1] - 1
    ch = 4 if fmt == "Y416" else 3
    yuv = (rng.integers(-4, 2 * m + 8, (h, w, ch)) / 2).astype(np.float32)
    expect = pack(fmt, yuv)
    pipe = fkl.compose(fkl.TensorRead(), fkl.WriteYUV(fmt), target=target)
    for rnd, (pad, start) in enumerate(((6, 0), (9, 0), (11, 3))):
        if rnd == 2:
            fkl.reset_stats()
        big = poisoned((expect.shape[0], expect.shape[1] + pad, *expect.shape[2:]),
                       expect.dtype)
        before = big.copy()
        inside = np.s_[:, start:start + expect.shape[1]]
        got = pipe(yuv, out=big[inside])
        assert got.base is not None
        np.testing.assert_array_equal(big[inside], expect)
        _outside_kept(big, before, inside)
    assert fkl.stats()["builds"] == 0
    # read a pitched frame, write a pitched frame: the same samples
    if FORMATS[fmt][2] == 0:
        src = np.full((expect.shape[0], expect.shape[1] + 4, *expect.shape[2:]), 9,
                      expect.dtype)
        src[:, 2:2 + expect.shape[1]] = expect
        big = poisoned(src.shape, expect.dtype)
        fkl.compose(fkl.ReadYUV(fmt), fkl.WriteYUV(fmt), target=target)(
            src[:, 2:2 + expect.shape[1]], out=big[:, 1:1 + expect.shape[1]])
        np.testing.assert_array_equal(big[:, 1:1 + expect.shape[1]], expect)


def test_write_yuv_pitched_out_errors() -> None:
    rgb = np.zeros((4, 6, 3), np.uint8)
    for fmt in ("I420", "YV12"):
        pipe = fkl.compose(fkl.TensorRead(), fkl.WriteYUV(fmt), target="cpu")
        with pytest.raises(ArgumentError, match=f"WriteYUV\\({fmt}\\) out.*must be "
                           "contiguous"):
            pipe(rgb, out=np.zeros((6, 9), np.uint8)[:, :6])
    nv12 = fkl.compose(fkl.TensorRead(), fkl.WriteYUV("NV12"), target="cpu")
    with pytest.raises(ArgumentError, match="column stride"):
        nv12(rgb, out=np.zeros((6, 12), np.uint8)[:, ::2])
    uyvy = fkl.compose(fkl.TensorRead(), fkl.WriteYUV("UYVY"), target="cpu")
    with pytest.raises(ArgumentError, match="packed pixels"):
        uyvy(rgb, out=np.zeros((4, 6, 4), np.uint8)[..., :2])


def test_strided_planar_kernels_compile_for_gpu() -> None:
    """The strided planar, dual and YUV-write forms compile to sm_90 cubin with NVRTC and
    nvcc without a GPU."""
    pytest.importorskip("thork_nvrtc")
    cases = [
        (fkl.compose(fkl.TensorPack(), fkl.Mul(2.0), fkl.TensorSplit(), target="gpu"),
         np.zeros((3, 6, 8), np.float32), ("pitched", "pitched-out", "pitched-both")),
        (fkl.compose(fkl.TensorTPack(), fkl.TensorTSplit(), target="gpu"),
         np.zeros((3, 2, 6, 8), np.uint8), ("pitched", "pitched-both")),
        (fkl.compose(fkl.DualRead(), fkl.Sub(), fkl.TensorWrite(), target="gpu"),
         [np.zeros((6, 8, 3), np.float32)] * 2, ("pitched", "pitched-both")),
        (fkl.compose(fkl.TensorRead(), fkl.RGB2YUV(), fkl.WriteYUV("NV12"), target="gpu"),
         np.zeros((6, 8, 3), np.uint8), ("pitched-out",)),
        (fkl.compose(fkl.ReadYUV("Y416"), fkl.WriteYUV("Y416"), target="gpu"),
         np.zeros((6, 8, 4), np.uint16), ("pitched-out",)),
        (fkl.compose(fkl.TensorRead(), fkl.SplitWrite(), target="gpu"),
         np.zeros((6, 8, 3), np.float32), ("pitched-out", "pitched-both")),
    ]
    compilers = [c for c in ("nvrtc", "nvcc") if has_plugin(c)]
    # a strided view names its pixel type as a contiguous array does
    view = np.zeros((3, 8, 12), np.float32)[:, :, :9]
    art = cases[0][0].artifact(view, arch="sm_90", compiler="nvrtc", variant="pitched")
    assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"
    for pipe, x, variants in cases:
        for variant in variants:
            for comp in compilers:
                art = pipe.artifact(x, arch="sm_90", compiler=comp, variant=variant)
                assert art.kind == "cubin" and art.data[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_strided_device_views_planar_dual_yuv_write(rng: np.random.Generator) -> None:
    """On the device, in place: a CuPy planar crop read by TensorPack, TensorSplit into a
    torch slice of a larger tensor, DualRead of two CuPy crops, WriteYUV into a CuPy
    pitched frame; values against NumPy, everything around the views untouched."""
    cupy = pytest.importorskip("cupy")
    big = rng.standard_normal((4, 19, 23)).astype(np.float32)
    dev = cupy.asarray(big)
    packer = fkl.compose(fkl.TensorPack(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    got = cupy.asnumpy(cupy.asarray(packer(dev[1:4, 2:15, 3:20])))
    np.testing.assert_allclose(got, (big[1:4, 2:15, 3:20] * 2).transpose(1, 2, 0), rtol=1e-6)
    x = rng.standard_normal((9, 13, 3)).astype(np.float32)
    split = fkl.compose(fkl.TensorRead(), fkl.Add(0.5), fkl.TensorSplit(), target="gpu")
    canvas = cupy.full((4, 12, 17), cupy.nan, cupy.float32)
    split(cupy.asarray(x), out=canvas[1:, 2:11, 3:16])
    host = cupy.asnumpy(canvas)
    np.testing.assert_allclose(host[1:, 2:11, 3:16], (x + np.float32(0.5)).transpose(2, 0, 1),
                               rtol=1e-6)
    host[1:, 2:11, 3:16] = np.nan
    assert np.isnan(host).all()
    a, b = rng.standard_normal((2, 11, 15, 3)).astype(np.float32)
    sub = fkl.compose(fkl.DualRead(), fkl.Sub(), fkl.TensorWrite(), target="gpu")
    got = cupy.asnumpy(cupy.asarray(sub(cupy.asarray(a)[1:9, 2:14],
                                        cupy.asarray(b)[2:10, 1:13])))
    np.testing.assert_allclose(got, a[1:9, 2:14] - b[2:10, 1:13], rtol=1e-6)
    yuv = (rng.integers(0, 510, (10, 14, 3)) / 2).astype(np.float32)
    frame = cupy.full((15, 40), 255, cupy.uint8)
    fkl.compose(fkl.TensorRead(), fkl.WriteYUV("NV12"), target="gpu")(
        cupy.asarray(yuv), out=frame[:, 3:17])
    host = cupy.asnumpy(frame)
    np.testing.assert_array_equal(host[:, 3:17], pack("NV12", yuv))
    assert (host[:, :3] == 255).all() and (host[:, 17:] == 255).all()
    torch = pytest.importorskip("torch")
    t = torch.full((3, 12, 20), float("nan"), device="cuda")
    split(cupy.asarray(x), out=t[:, 1:10, 4:17])
    np.testing.assert_allclose(t[:, 1:10, 4:17].cpu().numpy(),
                               (x + np.float32(0.5)).transpose(2, 0, 1), rtol=1e-6)
    assert torch.isnan(t[:, :1]).all() and torch.isnan(t[:, :, 17:]).all()


def test_strided_in_debug_mode(target: str, rng: np.random.Generator) -> None:
    """Debug mode (bounds-checked kernels) takes strided inputs and outputs: their spans
    are the views' extents, and in-bounds strided accesses pass."""
    x = rng.standard_normal((5, 7, 3)).astype(np.float32)
    big = poisoned((8, 12, 4), np.float32)
    fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target=target,
                debug=True)(x[:, ::2], out=big[1:6, 2:6, :3])
    np.testing.assert_allclose(big[1:6, 2:6, :3], x[:, ::2] * np.float32(2), rtol=1e-6)
    planes = rng.standard_normal((3, 9, 11)).astype(np.float32)
    canvas = poisoned((3, 10, 12), np.float32)
    fkl.compose(fkl.TensorPack(), fkl.TensorSplit(), target=target, debug=True)(
        planes[:, 1:8, 2:9], out=canvas[:, 2:9, 1:8])
    np.testing.assert_array_equal(canvas[:, 2:9, 1:8], planes[:, 1:8, 2:9])
    yuv = (rng.integers(0, 510, (10, 14, 3)) / 2).astype(np.float32)
    frame = poisoned((15, 20), np.uint8)
    fkl.compose(fkl.TensorRead(), fkl.WriteYUV("NV12"), target=target, debug=True)(
        yuv, out=frame[:, 3:17])
    np.testing.assert_array_equal(frame[:, 3:17], pack("NV12", yuv))
    assert (frame[:, :3] == 255).all() and (frame[:, 17:] == 255).all()


def test_strided_split_write_outputs(target: str, rng: np.random.Generator) -> None:
    """SplitWrite into views (each output its own strides, contiguous ones mixed in), in
    place, against NumPy; a MidWrite's output must stay contiguous."""
    x = rng.standard_normal((7, 9, 3)).astype(np.float32)
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(3.0), fkl.SplitWrite(), target=target)
    bigs = [poisoned((10, 12), np.float32), poisoned((7, 18), np.float32),
            np.empty((7, 9), np.float32)]
    befores = [b.copy() for b in bigs]
    inside = [np.s_[2:9, 1:10], np.s_[:, ::2], np.s_[:, :]]
    for _ in range(2):  # the second round starts on the hot path
        got = pipe(x, out=[b[i] for b, i in zip(bigs, inside, strict=True)])
        for k in range(3):
            np.testing.assert_allclose(bigs[k][inside[k]], x[..., k] * np.float32(3),
                                       rtol=1e-6)
            assert got[k].base is not None or got[k] is bigs[k]
        for k in range(2):
            _outside_kept(bigs[k], befores[k], inside[k])
    xb = rng.standard_normal((2, 5, 6, 2)).astype(np.float32)
    outs = [poisoned((2, 7, 8), np.float32)[:, 1:6, 2:8], poisoned((2, 5, 6), np.float32)]
    fkl.compose(fkl.TensorRead(), fkl.Add(1.0), fkl.SplitWrite(), target=target)(xb,
                                                                                 out=outs)
    for k in range(2):
        np.testing.assert_allclose(outs[k], xb[..., k] + np.float32(1), rtol=1e-6)
    mid = fkl.compose(fkl.TensorRead(), fkl.MidWrite(), fkl.Mul(2.0), fkl.SplitWrite(),
                      target=target)
    with pytest.raises(ArgumentError, match="out\\[0\\]: needs a C-contiguous array"):
        mid(x, out=[np.zeros((7, 12, 3), np.float32)[:, :9],
                    *[np.zeros((7, 9), np.float32) for _ in range(3)]])
    ok = [np.zeros((7, 9, 3), np.float32), np.zeros((7, 12), np.float32)[:, 1:10],
          np.zeros((7, 9), np.float32), np.zeros((7, 9), np.float32)]
    mid(x, out=ok)
    np.testing.assert_array_equal(ok[0], x)
    np.testing.assert_allclose(ok[1], x[..., 0] * np.float32(2), rtol=1e-6)
