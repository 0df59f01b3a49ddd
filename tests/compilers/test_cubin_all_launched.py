"""Runs last (marked run_last): every kernel the suite launched compiles to cubin with NVRTC for
sm_90 and sm_75 — CI has no GPU, so this is how it checks the GPU code of every test."""

import pytest
from helpers import LAUNCHED


@pytest.mark.run_last
@pytest.mark.plugin("nvrtc")
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_every_launched_kernel_compiles_to_cubin(arch):
    if not LAUNCHED:
        pytest.skip("no kernel was launched in this session (run the whole suite)")
    failures = []
    for name, kernel in sorted(LAUNCHED.items()):
        try:
            if kernel.ir.min_sm > int(arch[3:]):
                continue  # tensor-core kernels (sm_80+): their own tests compile them
            art = kernel.artifact(arch, compiler="nvrtc")
        except Exception as exc:  # collect all, report together
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:500]}")
            continue
        assert art.kind == "cubin" and art.data[:4] == b"\x7fELF", name
    assert not failures, "\n".join(failures)
    print(f"{len(LAUNCHED)} kernels compiled for {arch}")
