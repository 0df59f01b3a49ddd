"""Pitched frames on the hot path (h-pitch7): a call reading a pitched input or writing a
pitched ``out=`` is one table lookup and a prepared launch after its first call, like a
contiguous one; before, every pitched-``out=`` call (and, with several GPUs, every
pitched-DeviceBuffer call) re-ran the general path (adapters, planning): ~70 us of host
time per call against a 5-10 us kernel on the H200.

The CPU target runs the pitched kernels for real (values against NumPy references built
from the byte layouts, poisoned outputs, padding left alone). The GPU target's call path
runs here without a GPU: its kernels are traced for CUDA and its launches recorded
(``fake_gpu``), with pitched DeviceArrays wrapping made-up addresses — what reaches the
launch (addresses, the pitch) is checked, and which calls took the general path.
"""

from __future__ import annotations

from typing import Any

import fkl
import numpy as np
import pytest
from helpers import poisoned
from helpers.fake_gpu import wrap_device
from helpers.yuv import FORMATS, pack, random_frame, unpack
from thork_core import ArgumentError

pytestmark = pytest.mark.plugin("compose")


def _outside_kept(big: np.ndarray, before: np.ndarray, inside: Any) -> None:
    mask = np.ones(big.shape, bool)
    mask[inside] = False
    np.testing.assert_array_equal(big[mask], before[mask])


# -- CPU target: real kernels, NumPy references --------------------------------------------

@pytest.mark.parametrize("fmt", ["NV12", "P010", "P216", "UYVY", "Y416"])
def test_pitched_out_calls_are_hot(fmt: str, rng: np.random.Generator,
                                   slow_calls: list[int]) -> None:
    """WriteYUV into pitched frames: pads of 1 sample (no vector width divides the pitch),
    4, 16 and 64 samples, the crop starting mid-row; fresh inputs and poisoned frames on
    every call; one general-path call per pitch, every other call hot."""
    w, h = 14, 10 if FORMATS[fmt][3][1] == 2 else 7
    m = 2 ** FORMATS[fmt][1] - 1
    ch = 4 if fmt == "Y416" else 3
    pipe = fkl.compose(fkl.TensorRead(), fkl.WriteYUV(fmt), target="cpu")
    pads = (1, 4, 16, 64)
    for pad in pads:
        for start in (0, pad // 2, 0):  # the same pitch at another offset: still hot
            yuv = (rng.integers(-4, 2 * m + 8, (h, w, ch)) / 2).astype(np.float32)
            expect = pack(fmt, yuv)
            big = poisoned((expect.shape[0], expect.shape[1] + pad, *expect.shape[2:]),
                           expect.dtype)
            before = big.copy()
            inside = np.s_[:, start:start + expect.shape[1]]
            assert pipe(yuv, out=big[inside]) is not None
            np.testing.assert_array_equal(big[inside], expect)
            _outside_kept(big, before, inside)
    assert slow_calls[0] == len(pads)
    # a contiguous out= between pitched ones keeps its own path
    yuv = (rng.integers(0, m, (h, w, ch))).astype(np.float32)
    np.testing.assert_array_equal(pipe(yuv, out=poisoned(pack(fmt, yuv).shape,
                                                         FORMATS[fmt][0])), pack(fmt, yuv))


@pytest.mark.parametrize("fmt", ["NV12", "P016", "Y210"])
def test_pitched_read_and_pitched_out_are_hot(fmt: str, rng: np.random.Generator,
                                              slow_calls: list[int]) -> None:
    """ReadYUV from a pitched frame into a pitched (crop) canvas with TensorWrite: the
    samples are the layout's (NumPy unpacking), fresh frames each call, hot after the
    first; odd canvas widths (a pitch of 23 pixels)."""
    w, h = 10, 6
    pipe = fkl.compose(fkl.ReadYUV(fmt), fkl.TensorWrite(), target="cpu")
    dtype = FORMATS[fmt][0]
    for _ in range(4):
        frame = random_frame(rng, fmt, w, h)
        src = np.full((frame.shape[0], frame.shape[1] + 5, *frame.shape[2:]), 3, dtype)
        src[:, 5:] = frame
        canvas = poisoned((h + 3, 23, 3), dtype)
        before = canvas.copy()
        inside = np.s_[2:2 + h, 7:7 + w]
        pipe(src[:, 5:], out=canvas[inside])
        np.testing.assert_array_equal(canvas[inside], unpack(fmt, frame, w, h))
        _outside_kept(canvas, before, inside)
    assert slow_calls[0] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_strided_tensor_read_write_are_hot(dtype: Any, rng: np.random.Generator,
                                           slow_calls: list[int]) -> None:
    """TensorRead of a crop view into a TensorWrite crop view (odd sizes), fresh data each
    call: hot after the first, values against NumPy."""
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2), fkl.SaturateCast(np.dtype(dtype).name),
                       fkl.TensorWrite(), target="cpu")
    for _ in range(4):
        big = rng.integers(0, 100, (13, 21, 3)).astype(dtype)
        x = big[2:9, 3:12]
        out = poisoned((11, 17, 3), dtype)
        before = out.copy()
        pipe(x, out=out[1:8, 5:14])
        np.testing.assert_array_equal(out[1:8, 5:14], x * 2)  # below 256: exact
        _outside_kept(out, before, np.s_[1:8, 5:14])
    assert slow_calls[0] == 1


def test_hot_pitched_out_still_checks_overlap_and_read_only(slow_calls: list[int]) -> None:
    """The hot entry of a pitched out= keys its layout, not its place: an out= of the same
    layout overlapping the input, or read-only, is still an error on the hot path."""
    mem = np.zeros(8192, np.uint8)
    strided = np.lib.stride_tricks.as_strided
    pipe = fkl.compose(fkl.TensorRead(), fkl.WriteYUV("NV12"), target="cpu")
    rgb = strided(mem, (4, 6, 3), (64, 3, 1))
    rgb[...] = 100
    pipe(rgb, out=strided(mem[4096:], (6, 6), (64, 1)))
    pipe(rgb, out=strided(mem[4096:], (6, 6), (64, 1)))
    assert slow_calls[0] == 1
    keep = mem[:4096].copy()
    with pytest.raises(ArgumentError, match="separate from input 0"):
        pipe(rgb, out=strided(mem[10:], (6, 6), (64, 1)))  # inside the input's rows
    np.testing.assert_array_equal(mem[:4096], keep)  # nothing was launched
    ro = strided(mem[4096:], (6, 6), (64, 1), writeable=False)
    with pytest.raises(ArgumentError, match="read-only"):
        pipe(rgb, out=ro)
    # between the input's rows is not inside its bytes range: still rejected (ranges)
    with pytest.raises(ArgumentError, match="separate from input 0"):
        pipe(rgb, out=strided(mem[20:], (6, 6), (64, 1)))


# -- the GPU target's call path, without a GPU ----------------------------------------------

def test_gpu_path_pitched_device_buffer_read_is_hot(fake_gpu: list[Any],
                                                    slow_calls: list[int]) -> None:
    """NV12 1080p from a pitched DeviceBuffer into CHW float (the bench's row): one
    general-path call, then hot, with one GPU or several; the launch gets the frame's
    address and its pitch, the same kernel and grid as the contiguous frame's."""
    h, w = 1080, 1920
    pipe = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt709"), fkl.NormalizePixel(8),
                       fkl.TensorSplit(), target="gpu")
    chw = wrap_device(1 << 32, (3, h, w), "float32")
    flat = wrap_device(1 << 30, (h * 3 // 2, w), "uint8")
    pipe(flat, out=chw)
    (ref, _), = fake_gpu
    for pitch, addr in ((2048, 1 << 31), (2048, (1 << 31) + 4096), (1984, 1 << 33)):
        frame = wrap_device(addr, (h * 3 // 2, w), "uint8", pitch=pitch)
        for _ in range(3):
            fake_gpu.clear()
            assert pipe(frame, out=chw) is chw
            (prep, ptrs), = fake_gpu
            assert ptrs == [addr, 1 << 32]
            assert (prep.grid, prep.block) == (ref.grid, ref.block)
            # parameters: the frame, its width, height and pitch, the matrix..., the output
            assert prep.values[1:4] == [w, h, pitch] and ref.values[1:4] == [w, h, w]
            assert prep.values[4:] == ref.values[4:]
    assert slow_calls[0] == 1 + 2  # the contiguous frame's first call, one per pitch


def test_gpu_path_pitched_out_is_hot(fake_gpu: list[Any], slow_calls: list[int]) -> None:
    """RGB -> NV12 into a pitched DeviceBuffer (the bench's row), alternating with a
    contiguous frame: each layout plans once; its launches get its address and pitch."""
    h, w = 1080, 1920
    enc = fkl.compose(fkl.TensorRead(), fkl.RGB2YUV("bt709"), fkl.WriteYUV("NV12"),
                      target="gpu")
    rgb = wrap_device(1 << 33, (h, w, 3), "uint8")
    flat = wrap_device(1 << 34, (h * 3 // 2, w), "uint8")
    pitched = wrap_device(1 << 35, (h * 3 // 2, w), "uint8", pitch=2048)
    for _ in range(4):
        for out, pitch in ((flat, None), (pitched, 2048)):
            fake_gpu.clear()
            assert enc(rgb, out=out) is out
            (prep, ptrs), = fake_gpu
            assert ptrs == [1 << 33, out.ptr]
            ints = [v for v in prep.values[1:-1] if isinstance(v, int)]  # not the pointers
            assert ints == ([w, h] if pitch is None else [w, h, pitch])
            assert prep.grid == (-(-w // 64), -(-h // 16), 1)  # a thread per 2x2 block
    assert slow_calls[0] == 2


def test_gpu_path_hot_pitched_out_still_rejects_overlap(fake_gpu: list[Any],
                                                        slow_calls: list[int]) -> None:
    """A pitched out= of a known layout placed over the input: an error on the hot path
    too (the cheap range test finds the overlap, the full check reports it)."""
    h, w = 8, 12
    enc = fkl.compose(fkl.TensorRead(), fkl.WriteYUV("NV12"), target="gpu")
    rgb = wrap_device(1 << 33, (h, w, 3), "uint8")
    enc(rgb, out=wrap_device(1 << 34, (h * 3 // 2, w), "uint8", pitch=64))
    enc(rgb, out=wrap_device(1 << 35, (h * 3 // 2, w), "uint8", pitch=64))
    assert slow_calls[0] == 1
    fake_gpu.clear()
    with pytest.raises(ArgumentError, match="separate from input 0"):
        enc(rgb, out=wrap_device((1 << 33) + 100, (h * 3 // 2, w), "uint8", pitch=64))
    with pytest.raises(ArgumentError, match="separate from input 0"):  # ends in the input
        enc(rgb, out=wrap_device((1 << 33) - 64 * 11, (h * 3 // 2, w), "uint8", pitch=64))
    assert not fake_gpu
    enc(rgb, out=wrap_device((1 << 33) + h * w * 3, (h * 3 // 2, w), "uint8", pitch=64))
    assert len(fake_gpu) == 1  # right after the input's last byte: fine


def test_gpu_path_pitched_read_still_rejects_overlap(fake_gpu: list[Any]) -> None:
    """The read's hot entry (a pitched input, a contiguous out=) keeps the aliasing check:
    an out= over the input's bytes is an error on every call."""
    h, w = 8, 12
    pipe = fkl.compose(fkl.ReadYUV("NV12", to_rgb="bt601"), fkl.TensorSplit(),
                       target="gpu")
    frame = wrap_device(1 << 33, (h * 3 // 2, w), "uint8", pitch=64)
    pipe(frame, out=wrap_device(1 << 34, (3, h, w), "float32"))
    pipe(frame, out=wrap_device(1 << 34, (3, h, w), "float32"))
    out_bytes = 3 * h * w * 4
    for _ in range(2):
        with pytest.raises(ArgumentError, match="separate from input 0"):
            pipe(frame, out=wrap_device((1 << 33) + 256, (3, h, w), "float32"))
        with pytest.raises(ArgumentError, match="separate from input 0"):  # ends inside
            pipe(frame, out=wrap_device((1 << 33) - out_bytes + 1, (3, h, w), "float32"))
        last = (1 << 33) + (h * 3 // 2 - 1) * 64 + w - 1  # the frame's last byte
        with pytest.raises(ArgumentError, match="separate from input 0"):
            pipe(frame, out=wrap_device(last, (3, h, w), "float32"))
    fake_gpu.clear()
    pipe(frame, out=wrap_device((1 << 33) - out_bytes, (3, h, w), "float32"))  # ends at its start
    pipe(frame, out=wrap_device(last + 1, (3, h, w), "float32"))  # starts after its last byte
    assert len(fake_gpu) == 2


def test_gpu_path_contiguous_hot_aliasing_on_byte_spans(fake_gpu: list[Any],
                                                        slow_calls: list[int]) -> None:
    """The hot path's aliasing test on precomputed spans, for contiguous DeviceBuffers
    (Python's hot path: core's C guard is not there): a separate out= launches, out= the
    input itself launches (a per-pixel chain computes in place), a partly overlapping
    one is rejected on every call."""
    shape = (9, 13, 3)
    nbytes = 9 * 13 * 3 * 4
    pipe = fkl.compose(fkl.TensorRead(), fkl.Mul(2.0), fkl.TensorWrite(), target="gpu")
    x = wrap_device(1 << 33, shape, "float32")
    pipe(x, out=wrap_device(1 << 34, shape, "float32"))
    fake_gpu.clear()
    pipe(x, out=wrap_device(1 << 34, shape, "float32"))
    pipe(x, out=x)
    pipe(x, out=wrap_device((1 << 33) + nbytes, shape, "float32"))  # right after it
    pipe(x, out=wrap_device((1 << 33) - nbytes, shape, "float32"))  # right before it
    assert [p[1][-1] for p in fake_gpu] == [1 << 34, 1 << 33, (1 << 33) + nbytes,
                                            (1 << 33) - nbytes]
    for shift in (16, -16, nbytes - 16, 16 - nbytes):
        with pytest.raises(ArgumentError, match="overlap partially"):
            pipe(x, out=wrap_device((1 << 33) + shift, shape, "float32"))
    assert len(fake_gpu) == 4 and slow_calls[0] == 1
