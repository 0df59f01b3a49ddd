"""Compile errors from every CUDA compiler point at the Python file and line, through the
``#line`` directives of the generated source."""

from __future__ import annotations

import re

import pytest
from helpers.compiler_suite import CUDA_COMPILERS, kernel_for, require_compiler
from thork_core import CompileError, CudaRenderer, plugins, reset_plugins


def _broken_source(kernel, line: int, file: str) -> str:
    """The kernel's real source with a statement no compiler accepts, attributed (as the
    renderer attributes every statement) to ``file``:``line``."""
    return _broken_source_text(CudaRenderer().render(kernel.ir), line, file)


def _where(message: str, file: str, line: int) -> bool:
    # nvcc/NVRTC: "x.py(7): error"; clang: "x.py:7:3: error".
    return re.search(rf"{re.escape(file)}(?:\({line}\)|:{line}:)", message) is not None


@pytest.mark.parametrize("compiler", CUDA_COMPILERS)
def test_error_names_python_file_and_line(compiler, monkeypatch, tmp_path):
    require_compiler(compiler)
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    comp = next(c for c in plugins().compilers() if c.name == compiler)
    k = kernel_for("saxpy", compiler)
    file = "/home/user/project/my_kernels.py"
    with pytest.raises(CompileError) as err:
        comp.compile(_broken_source(k, 7, file), entry="saxpy", kind="cubin", arch="sm_80")
    assert _where(str(err.value), file, 7), str(err.value)
    assert "thork_no_such_function" in str(err.value)


def test_clang_error_without_fallback_is_clangs_own(monkeypatch, tmp_path):
    require_compiler("clang")
    monkeypatch.setenv("THORK_CLANG_FALLBACK", "0")
    comp = next(c for c in plugins().compilers() if c.name == "clang")
    with pytest.raises(CompileError) as err:
        comp.compile(_broken_source(kernel_for("saxpy"), 12, "pkg/k.py"), entry="saxpy",
                     kind="ptx", arch="sm_80")
    assert _where(str(err.value), "pkg/k.py", 12) and "error:" in str(err.value)


def test_traced_kernel_error_through_the_renderer(monkeypatch, tmp_path):
    """End to end: a renderer emitting a bad statement for a traced kernel; the error from
    ``Kernel.artifact`` names the kernel's own Python file."""
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    reset_plugins()
    k = kernel_for("control")
    file, line = k.ir.loc.file, k.ir.loc.line + 3
    original = CudaRenderer.render

    def render(self, ir):
        return _broken_source_text(original(self, ir), line, file)

    monkeypatch.setattr(CudaRenderer, "render", render)
    for compiler in CUDA_COMPILERS:
        if not any(c.name == compiler and c.available()[0] for c in plugins().compilers()):
            continue
        with pytest.raises(CompileError) as err:
            kernel_for("control", compiler).artifact("sm_75")
        assert _where(str(err.value), file, line), (compiler, str(err.value)[:2000])


def _broken_source_text(src: str, line: int, file: str) -> str:
    head, sep, tail = src.rpartition("\n}")
    return f'{head}\n#line {line} "{file}"\n  thork_no_such_function(42);{sep}{tail}'
