"""NVRTC's precompiled prelude (session 13, ``thork_nvrtc._compiler``): the prelude passed
as an in-memory header compiled with ``-pch`` gives the code of the whole text compiled as
one file, for every kernel shape, across threads, with another prelude or other options,
and every failure falls back to the whole text. Cubins only: NVRTC runs here without a
GPU."""

from __future__ import annotations

import json
import os
import struct
import sys
import textwrap

import pytest
import thork as tk
from helpers import run_python
from helpers.compiler_suite import kernel_for, require_compiler
from thork_core import CompileError, CudaRenderer, plugins

f32 = tk.dt.float32
ARCH = "sm_90"

#: Sections holding only debug line information: they name the header instead of
#: ``<entry>.cu`` for prelude helpers inlined into the kernel (see _compiler.py).
_LINE_SECTIONS = {".debug_line", ".rela.debug_line", ".nv_debug_ptx_txt"}


def _sections(cubin: bytes) -> dict[str, bytes]:
    """An ELF64 cubin's sections by name (NOBITS sections: their size, as bytes)."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * entsize)
             for i in range(count)]
    base = heads[names][4]
    out = {}
    for h in heads:
        name = cubin[base + h[0]:cubin.index(b"\0", base + h[0])].decode()
        out[name] = str(h[5]).encode() if h[1] == 8 else cubin[h[4]:h[4] + h[5]]
    return out


def _same_code(a: bytes, b: bytes) -> bool:
    """Whether two cubins hold the same sections with the same bytes, the debug line
    table aside."""
    sa, sb = _sections(a), _sections(b)
    return sa.keys() == sb.keys() and all(sa[k] == sb[k] for k in sa if k not in _LINE_SECTIONS)


@pytest.fixture
def nvrtc():
    require_compiler("nvrtc")
    comp = next(c for c in plugins().compilers() if c.name == "nvrtc")
    from thork_nvrtc import _compiler

    if not comp._pch_supported():
        pytest.skip(f"NVRTC {comp.version()} has no automatic PCH (12.8+)")
    return comp, _compiler


def _both(comp, monkeypatch, source: str, entry: str):
    """(cubin through the precompiled prelude, twice: a process's first compile of a
    header is without PCH, the second makes it, later ones use it; the whole text
    without PCH), each with its log."""
    monkeypatch.delenv("THORK_NVRTC_PCH", raising=False)
    comp.compile(source, entry=entry, kind="cubin", arch=ARCH)
    first = comp.compile(source, entry=entry, kind="cubin", arch=ARCH)
    again = comp.compile(source, entry=entry, kind="cubin", arch=ARCH)
    monkeypatch.setenv("THORK_NVRTC_PCH", "0")
    plain = comp.compile(source, entry=entry, kind="cubin", arch=ARCH)
    monkeypatch.delenv("THORK_NVRTC_PCH")
    return first, again, plain


@tk.jit(name="pch_fast")
def pch_fast(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32], n: tk.dt.int32):
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        out[i] = tk.fast.sin(x[i]) + tk.fast.exp2(x[i])


@tk.jit(name="pch_bounded")
def pch_bounded(out: tk.DevicePointer[f32], x: tk.DevicePointer[f32], n: tk.dt.int32):
    tk.launch_bounds(128, 2)  # the body then starts with #ifndef __launch_bounds__
    i = tk.block_idx().x * tk.block_dim().x + tk.thread_idx().x
    with tk.if_(i < n):
        out[i] = x[i] * 3.0 + 1.0


def _kernel(name: str):
    return {"fast": pch_fast, "bounded": pch_bounded}.get(name) or kernel_for(name)


@pytest.mark.parametrize("name", ["saxpy", "half_math", "control", "math64", "fast",
                                  "bounded"])
def test_precompiled_prelude_gives_the_whole_texts_code(nvrtc, monkeypatch, name):
    """Each kernel shape (prelude helpers inlined: half_math; body helpers: tk.fast; a body
    starting with directives: launch bounds) compiles through the PCH to the code of its
    whole text; the header's PCH is made once and used."""
    comp, mod = nvrtc
    k = _kernel(name)
    src = CudaRenderer().render(k.ir)
    first, again, plain = _both(comp, monkeypatch, src, k.ir.name)
    assert _same_code(first.data, plain.data) and _same_code(again.data, plain.data), name
    # The log: no PCH message, and the same with or without PCH (the artifact's log must
    # not depend on how many compiles the process made before): the prelude's helpers are
    # marked unused, so the whole text does not warn "declared but never referenced" on
    # those the kernel does not call (a header's never are)
    assert first.log == again.log == plain.log and "precompiled" not in first.log
    assert "never referenced" not in plain.log, plain.log
    flags = [*comp.flags("cubin", ARCH)]
    header = mod.prelude_header(src, flags)
    assert header is not None and mod.pch_state()[header[0]] is True
    # NVRTC's own messages: this compile uses the one PCH and creates none (the ";" ends
    # the main file's leading directives even where the body starts with #ifndef)
    failed, log, _ = mod._run(header[2], k.ir.name, "cubin", [*flags, "-pch"],
                              ((header[0], header[1]),))
    assert not failed and "using precompiled header" in log and "creating" not in log, log


def test_prelude_helpers_free_kernel_is_byte_identical(nvrtc, monkeypatch):
    """A kernel inlining no prelude helper: the cubin is the same byte for byte (the line
    numbers of the body are those of the whole text)."""
    comp, _ = nvrtc
    k = kernel_for("saxpy")
    first, again, plain = _both(comp, monkeypatch, CudaRenderer().render(k.ir), "saxpy")
    assert first.data == again.data == plain.data


def test_main_text_keeps_every_line_number(nvrtc):
    _, mod = nvrtc
    src = CudaRenderer().render(kernel_for("control").ir)
    name, header, main = mod.prelude_header(src, ["--gpu-architecture=sm_90"])
    assert main.startswith(f'#include "{name}"\n;\n')
    assert main.count("\n") == src.count("\n")
    n = header.count("\n")
    assert main.splitlines()[n:] == src.splitlines()[n:]
    assert mod.prelude_header("// not Thork's\n" + src, []) is None


def test_header_name_is_a_digest_of_prelude_and_options(nvrtc, monkeypatch):
    _, mod = nvrtc
    src = CudaRenderer().render(kernel_for("saxpy").ir)
    a = mod.prelude_header(src, ["--gpu-architecture=sm_90"])[0]
    assert a == mod.prelude_header(src, ["--gpu-architecture=sm_90"])[0]
    assert a != mod.prelude_header(src, ["--gpu-architecture=sm_80"])[0]
    assert a != mod.prelude_header(src, ["--gpu-architecture=sm_90", "-DX=1"])[0]
    original = CudaRenderer.prelude
    monkeypatch.setattr(CudaRenderer, "prelude", lambda self: original(self) + "// other\n")
    other = CudaRenderer().prelude() + src[len(original(CudaRenderer())):]
    assert mod.prelude_header(other, ["--gpu-architecture=sm_90"])[0] != a


def test_another_prelude_never_reuses_a_pch(nvrtc, monkeypatch):
    """Two preludes that differ in one helper's value: each kernel gets its own text's
    code (the cubins differ, so reusing the other's PCH would show), through two PCHs."""
    comp, mod = nvrtc
    original = CudaRenderer.prelude
    body = ('extern "C" __global__ void pch_variant(float* o)\n{\n'
            "  o[threadIdx.x] = thork_pch_test_value() * (float)threadIdx.x;\n}\n")
    got = {}
    for value in ("2.0f", "3.0f", "2.0f"):
        extra = f"THORK_FN float thork_pch_test_value() {{ return {value}; }}\n"
        monkeypatch.setattr(CudaRenderer, "prelude", lambda self, e=extra: original(self) + e)
        src = CudaRenderer().prelude() + body
        first, again, plain = _both(comp, monkeypatch, src, "pch_variant")
        assert first.data == again.data == plain.data, value
        got.setdefault(value, first.data)
        assert got[value] == first.data
        name = mod.prelude_header(src, comp.flags("cubin", ARCH))[0]
        assert mod.pch_state()[name] is True
    assert got["2.0f"] != got["3.0f"]


def test_compile_error_log_is_the_whole_texts(nvrtc, monkeypatch):
    """A user's error: the PCH compile fails, the whole text is compiled again and its
    error is reported: the user's file and line, the same log as without PCH."""
    comp, mod = nvrtc
    src = CudaRenderer().render(kernel_for("saxpy").ir)
    head, sep, tail = src.rpartition("\n}")
    bad = f'{head}\n#line 41 "/home/user/my_kernels.py"\n  thork_no_such_function(42);{sep}{tail}'
    for _ in range(2):  # the header's PCH made (a process's first compile has none)
        comp.compile(src, entry="saxpy", kind="cubin", arch=ARCH)
    calls = []
    run = mod._run
    monkeypatch.setattr(mod, "_run", lambda *a, **k: calls.append(a[3]) or run(*a, **k))
    logs = []
    for pch in ("1", "0"):
        monkeypatch.setenv("THORK_NVRTC_PCH", pch)
        with pytest.raises(CompileError) as err:
            comp.compile(bad, entry="saxpy", kind="cubin", arch=ARCH)
        logs.append(err.value.log)
        assert "my_kernels.py(41)" in str(err.value) and err.value.source == bad
    assert logs[0] == logs[1]
    assert ["-pch" in c for c in calls] == [True, False, False]


def test_switched_off_and_old_nvrtc_get_no_pch_options(nvrtc, monkeypatch):
    comp, mod = nvrtc
    src = CudaRenderer().render(kernel_for("saxpy").ir)
    calls = []
    run = mod._run
    monkeypatch.setattr(mod, "_run", lambda *a, **k: calls.append(a[3]) or run(*a, **k))
    monkeypatch.setenv("THORK_NVRTC_PCH", "0")
    comp.compile(src, entry="saxpy", kind="cubin", arch=ARCH)
    monkeypatch.delenv("THORK_NVRTC_PCH")
    old = type(comp)()
    monkeypatch.setattr(type(comp), "version", lambda self: "12.6")
    assert old._pch_supported() is False
    old.compile(src, entry="saxpy", kind="cubin", arch=ARCH)
    assert calls and not any("-pch" in c for c in calls)
    monkeypatch.setattr(type(comp), "version", lambda self: "12.8")
    assert type(comp)()._pch_supported() is True


def _subprocess(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("THORK_NVRTC_PCH", None)
    out = run_python(textwrap.dedent(code), env=env, timeout=600)
    return json.loads(out.strip().splitlines()[-1])


_BODIES = r"""
from thork_core import CudaRenderer, plugins
comp = next(c for c in plugins().compilers() if c.name == "nvrtc")
P = CudaRenderer().prelude()
def text(i):
    return P + (f'#ifndef THORK_T{i}\n#define THORK_T{i} {i}\n#endif\n'
                f'extern "C" __global__ void k{i % 3}(float* o, const float* a)\n{{\n'
                f'  unsigned t = threadIdx.x;\n  o[t] = a[t] * {i}.5f + THORK_T{i};\n'
                f'  for (int j = 0; j < {i}; ++j) o[t] += a[t + j];\n}}\n')
"""


def test_threads_give_the_serial_cubins(nvrtc):
    """A fresh process, 16 kernels (entry names shared by several; sm_90 and sm_80: two
    headers) compiled by 8 threads at once while no PCH exists yet, then again with the
    PCHs made: the cubins of a serial compile without PCH."""
    r = _subprocess(_BODIES + r"""
    import json, os
    from concurrent.futures import ThreadPoolExecutor
    from thork_nvrtc import _compiler as mod
    def one(i, arch=None):
        arch = arch or ("sm_90" if i % 2 else "sm_80")
        return comp.compile(text(i), entry=f"k{i % 3}", kind="cubin", arch=arch).data
    with ThreadPoolExecutor(8) as ex:
        cold = list(ex.map(one, range(16)))
    with ThreadPoolExecutor(8) as ex:
        warm = list(ex.map(one, range(16)))
    os.environ["THORK_NVRTC_PCH"] = "0"
    serial = [one(i) for i in range(16)]
    print(json.dumps({"cold": [a == b for a, b in zip(cold, serial)],
                      "warm": [a == b for a, b in zip(warm, serial)],
                      "state": list(mod.pch_state().values())}))
    """.replace("\n    ", "\n"))
    assert all(r["cold"]) and all(r["warm"]), r
    assert r["state"] == [True, True], r


def test_pch_heap_exhausted_falls_back(nvrtc):
    """A PCH heap too small for the prelude: the compile succeeds without PCH, with the
    whole text's cubin, and the header is not tried again (the heap is left as it is)."""
    r = _subprocess(_BODIES + r"""
    import json, os
    from cuda.bindings import nvrtc as nv
    from thork_nvrtc import _compiler as mod
    nv.nvrtcSetPCHHeapSize(1 << 16)
    got = [comp.compile(text(i), entry="k0", kind="cubin", arch="sm_90").data
           for i in range(3)]
    state = list(mod.pch_state().values())
    os.environ["THORK_NVRTC_PCH"] = "0"
    plain = [comp.compile(text(i), entry="k0", kind="cubin", arch="sm_90").data
             for i in range(3)]
    print(json.dumps({"same": [a == b for a, b in zip(got, plain)], "state": state,
                      "heap": nv.nvrtcGetPCHHeapSize()[1]}))
    """.replace("\n    ", "\n"))
    assert all(r["same"]) and r["state"] == [False], r
    assert r["heap"] <= 1 << 20, r  # not resized by Thork


def test_a_headers_first_compile_makes_no_pch(nvrtc, monkeypatch):
    """Making a PCH costs ~8 ms: a process compiling one kernel never pays it. The first
    compile of a header is the whole text, the second makes the PCH, the third uses it."""
    comp, mod = nvrtc
    original = CudaRenderer.prelude
    extra = f"// a prelude of this test only {os.getpid()} {id(comp)}\n"
    monkeypatch.setattr(CudaRenderer, "prelude", lambda self: original(self) + extra)
    src = CudaRenderer().prelude() + 'extern "C" __global__ void pch_first(float* o) { }\n'
    name = mod.prelude_header(src, comp.flags("cubin", ARCH))[0]
    calls = []
    run = mod._run
    monkeypatch.setattr(mod, "_run", lambda *a, **k: calls.append(a[3]) or run(*a, **k))
    states = []
    for _ in range(3):
        comp.compile(src, entry="pch_first", kind="cubin", arch=ARCH)
        states.append(mod.pch_state().get(name))
    assert ["-pch" in c for c in calls] == [False, True, True]
    assert states == [None, True, True]
