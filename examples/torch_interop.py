"""torch tensors in a Thork kernel and an fkl pipe, zero-copy, and both as torch custom ops.

On a GPU the tensors are CUDA tensors and everything runs on torch's current stream;
without one the same code runs CPU tensors on the CPU target. Needs torch
(pip install "thork[torch]"). Usage: python examples/torch_interop.py
"""

import fkl
import numpy as np
import thork as tk
import thork_torch
import torch


@tk.jit
def scale_add(x: tk.DevicePointer[tk.dt.float32], a: tk.dt.float32, n: tk.dt.int32,
              out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx],
              tid: tk.Uint[tk.ThreadIdx], bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * a + 1.0


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    target = "gpu" if device == "cuda" else "cpu"
    ok = True

    # 1. A kernel writes a torch tensor in place (no copies), on torch's current stream.
    n = 100_003
    x = torch.randn(n, device=device)
    out = torch.full((n,), float("nan"), device=device)
    thork_torch.wrap(scale_add[(n + 255) // 256, 256])(x, 3.0, n, out)
    # The GPU contracts x*a + 1 into one fused multiply-add (one rounding): compare with
    # the exact value in float64, within float32's rounding (near x = -1/3 the result is
    # ~0, where a relative tolerance alone would reject a correctly rounded answer).
    ref1 = x.cpu().numpy().astype(np.float64) * 3 + 1
    ok &= np.allclose(out.cpu().numpy(), ref1, rtol=1e-6, atol=1e-6)

    # 2. A pipe: Thork's own array back by default, a torch tensor with like_input.
    pipe = fkl.compose(fkl.TensorRead(), fkl.Cast("float32"), fkl.Mul(1 / 255),
                       fkl.Sub([0.485, 0.456, 0.406]), fkl.TensorSplit(), target=target)
    img = torch.randint(0, 256, (120, 160, 3), dtype=torch.uint8, device=device)
    chw = thork_torch.wrap(pipe, output="like_input")(img)
    ref = (img.cpu().numpy().astype(np.float32) / 255 - np.float32([0.485, 0.456, 0.406]))
    ok &= isinstance(chw, torch.Tensor) and np.allclose(
        chw.cpu().numpy(), ref.transpose(2, 0, 1), atol=1e-6)

    # 3. The pipe as a torch custom op: torch allocates the output, the fake
    #    implementation gives torch.compile its shape (no graph break).
    thork_torch.custom_op("thork_example::normalize", pipe)
    y = torch.ops.thork_example.normalize(img)
    ok &= tuple(y.shape) == (3, 120, 160) and np.allclose(
        y.cpu().numpy(), ref.transpose(2, 0, 1), atol=1e-6)
    if device == "cuda":  # torch.compile on the CPU builds C++ (a minute): GPU only here
        f = torch.compile(lambda t: torch.ops.thork_example.normalize(t).mean(0),
                          fullgraph=True)
        ok &= np.allclose(f(img).cpu().numpy(), ref.mean(2), atol=1e-5)

    print(f"torch interop on {device}: {'ok' if ok else 'MISMATCH'}")
    # How the hot paths read CUDA tensors: torch's C++ objects once the reader is built
    # (THORK_TORCH_READER, docs/torch.md), else torch's Python API.
    print(f"tensors on the hot path: {thork_torch.reader_status()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
