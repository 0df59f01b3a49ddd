"""Kernels defined under ``from __future__ import annotations`` (string annotations),
including kernel factories whose annotations name the factory's arguments."""

from __future__ import annotations

import numpy as np
import pytest
import thork as tk
from helpers import poisoned
from thork_core import TraceError


def make_fill(dtype):
    @tk.jit
    def fill(out: tk.DevicePointer[dtype], value: dtype, tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = value

    return fill


@pytest.mark.parametrize("name,value", [("int16", -123), ("float64", 2.5), ("uint8", 200)])
def test_factory_with_string_annotations(target, name, value):
    d = getattr(tk.dt, name)
    out = poisoned(37, d.numpy)
    make_fill(d)[1, 37](out, value, target=target)
    np.testing.assert_array_equal(out, np.full(37, value, d.numpy))


def test_unresolvable_annotation_names_the_parameter():
    @tk.jit
    def bad(out: tk.DevicePointer[not_defined_anywhere], tid: tk.Uint[tk.ThreadIdx]):  # noqa: F821
        out[tid] = 1

    with pytest.raises(TraceError, match=r"cannot evaluate the annotation of 'out'"):
        bad.source
