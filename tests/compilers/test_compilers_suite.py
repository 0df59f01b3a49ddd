"""The compiler test-kernel suite: every kernel compiles to cubin with every installed CUDA
compiler for sm_75, sm_80 and sm_90, and runs correctly on each available target.

The kernels, their references and ``SUITE`` live in ``tests/helpers/compiler_suite.py``
(other compiler tests, the toolchain nox sessions and ``bench/bench_compilers.py`` use
them too). ``THORK_TEST_COMPILERS`` (comma separated) restricts the compilers, so a
toolchain session tests exactly the toolchain it installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.compiler_suite import ARCHS, SUITE, kernel_for, require_compiler, wanted_compilers


# -- tests ----------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("compiler", wanted_compilers())
@pytest.mark.parametrize("name", list(SUITE))
def test_suite_compiles_to_cubin(name, compiler, arch):
    require_compiler(compiler)
    art = kernel_for(name, compiler).artifact(arch, kind="cubin")
    assert art.kind == "cubin" and art.arch == arch and art.entry == name
    assert art.data[:4] == b"\x7fELF", f"{compiler} did not produce an ELF cubin for {arch}"
    fallback = art.info.get("fallback", "")
    if compiler == "clang":
        # clang >= 11 knows sm_75/sm_80: a fallback there means the clang path is broken.
        from thork_clang import find_clang

        clang, _ = find_clang()
        if clang is not None and arch in ("sm_75", "sm_80") and clang.major >= 11:
            assert fallback == "", f"clang fell back for {arch}: {fallback}"
        assert art.compiler.startswith("clang-") or fallback.startswith("nvcc: ")
    else:
        assert fallback == ""
        assert art.compiler.startswith(f"{compiler}-")


@pytest.mark.parametrize("name", list(SUITE))
def test_suite_runs_correctly(target, rng, name):
    case = SUITE[name]
    args = case.make(rng)
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel_for(name)[case.grid, case.block](*args, target=target)
    case.check(args, before)
