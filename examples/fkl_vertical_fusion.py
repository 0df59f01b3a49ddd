"""Vertical fusion basics: a chain of per-pixel ops becomes ONE kernel.

Runs on the GPU when one is visible, else on the CPU target; checks against NumPy.
"""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name  # "gpu" when visible, else "cpu"
rng = np.random.default_rng()
x = rng.standard_normal((481, 641, 3)).astype(np.float32)

pipe = fkl.compose(
    fkl.TensorRead(),
    fkl.Mul(2.0),  # fused
    fkl.Add(1.0),  # fused -> one kernel, one read and one write of the image
    fkl.Mul(3.0),  # fused
    fkl.TensorWrite(),
    target=target,
)
out = pipe(x)
np.testing.assert_allclose(out, (x * 2 + 1) * 3, rtol=1e-6)

# Values are runtime parameters: a pipe with other factors reuses the same kernel.
builds = fkl.stats()["builds"]
pipe2 = fkl.compose(fkl.TensorRead(), fkl.Mul(0.5), fkl.Add(-4.0), fkl.Mul(10.0),
                    fkl.TensorWrite(), target=target)
np.testing.assert_allclose(pipe2(x), (x * 0.5 - 4) * 10, rtol=1e-5, atol=1e-5)
assert fkl.stats()["builds"] == builds

# StaticLoop: 1000 applications of one op, compiled as one loop (constant code size).
loop = fkl.compose(fkl.TensorRead(), fkl.StaticLoop(fkl.Mul(1.001), 1000), fkl.TensorWrite(),
                   target=target)
ref = x.copy()
for _ in range(1000):
    ref = ref * np.float32(1.001)
np.testing.assert_allclose(loop(x), ref, rtol=1e-4)
print(f"vertical fusion on {target}: OK ({fkl.stats()['builds']} kernels built)")
