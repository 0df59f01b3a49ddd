"""FKL's tuple forms over N sources (docs/fkl.md, "Tuple forms over N sources"): one kernel
reads five frames and combines them, checked against NumPy.

* the mean of five uint8 frames: ``TupleRead(5) → Add() → Cast → Mul(1/5)`` (the sum is
  int32 after the first step, so nothing wraps);
* the per-pixel range over the frames, ``Max() - Min()``, as two pipes;
* ``Sub()`` folds left: ``s0 - s1 - s2``.
"""

from __future__ import annotations

import fkl
import numpy as np
from thork_core import plugins

target = plugins().target(None).name
rng = np.random.default_rng()
frames = [rng.integers(0, 256, (37, 53, 3), dtype=np.uint8) for _ in range(5)]

mean = fkl.compose(fkl.TupleRead(5), fkl.Add(), fkl.Cast("float32"), fkl.Mul(1 / 5),
                   fkl.TensorWrite(), target=target)(*frames)
want = np.stack(frames).astype(np.int32).sum(axis=0).astype(np.float32) * np.float32(1 / 5)
np.testing.assert_allclose(mean, want, rtol=1e-6)


def fold(op: fkl.Op) -> np.ndarray:
    return fkl.compose(fkl.TupleRead(5), op, fkl.TensorWrite(), target=target)(*frames)


spread = fold(fkl.Max()) - fold(fkl.Min())
np.testing.assert_array_equal(spread, np.ptp(np.stack(frames).astype(np.int32), axis=0))

a, b, c = (f.astype(np.int32) for f in frames[:3])
sub = fkl.compose(fkl.TupleRead(3), fkl.Sub(), fkl.TensorWrite(), target=target)(*frames[:3])
assert sub.dtype == np.int32
np.testing.assert_array_equal(sub, a - b - c)
print(f"tuple forms over 5 sources on {target}: OK")
