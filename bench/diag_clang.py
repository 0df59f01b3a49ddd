"""Diagnose clang-compiled rounding on a GPU machine: which PTX does clang emit for rint,
which libdevice it links, and what the GPU computes. Usage: python bench/diag_clang.py"""

import numpy as np
import thork as tk
from thork_core import plugins
from thork_core._gpu import GpuTarget


@tk.jit(compiler="clang")
def rint_k(o: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
           t: tk.Uint[tk.ThreadIdx]):
    o[t] = tk.rint(a[t])


c = plugins().compiler("clang", GpuTarget())
print(c.describe())
art = rint_k.artifact("sm_90", compiler="clang", kind="ptx")
print("fallback:", art.info.get("fallback"), "| compiler:", art.compiler)
txt = art.data.decode()
print([line.strip() for line in txt.splitlines() if "cvt" in line or "call" in line][:10])
x = np.array([0.5, 1.5, 2.5, -0.5, 46.5, 46.3, 254.5, 3.7], np.float32)
out = np.zeros_like(x)
rint_k[1, 8](out, x)
print("gpu:", out, "numpy:", np.rint(x), "info:", rint_k.compile_info.compiler,
      rint_k.compile_info.fallback)
cub = rint_k.artifact("sm_90", compiler="clang", kind="cubin")
print("cubin fallback:", cub.info.get("fallback"), cub.compiler, cub.info)
