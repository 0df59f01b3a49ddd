"""The traced record (``_build.traced_build``, ``thork._fingerprint``): a fresh process's
first launch takes a kernel's IR and artifact from the cache, without tracing, only while
every input of the trace is unchanged. Each adversarial change below (a module global, a
closure cell, an edited ``@tk.func``, a helper's default argument, a user module's
constant, a compile-time constant, an annotation, the architecture, a compiler variable,
Thork's own code, a tampered or forged entry) must miss, trace again and give the key the
full path gives (the reference: ``THORK_TRACED_RECORD=0``).

The GPU target is stubbed as in test_selection_record (available, ``THORK_ARCH=sm_90``,
``load`` hands back the artifact; NVRTC compiles here without a GPU). "A new process" is
a new :class:`Kernel` of the same function, the memo re-read and the registry forgotten.
The ``[gpu]`` test launches for real and compares values with NumPy."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from thork_core import _build, _cache, _memo, _plugins, reset_plugins

nvrtc = pytest.importorskip("thork_nvrtc._compiler")
tk = pytest.importorskip("thork")
from thork import _fingerprint, _kernel  # noqa: E402

TRACES: list[str] = []


@pytest.fixture
def gpu(tmp_path, monkeypatch):
    """A private cache, THORK_ARCH=sm_90, a stubbed available GPU target whose load hands
    back the artifact; traces counted in TRACES."""
    from thork_core import _cuda
    from thork_core._gpu import GpuTarget

    if not nvrtc.NvrtcCompiler().available()[0]:
        pytest.skip("NVRTC is not usable here")
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("THORK_ARCH", "sm_90")
    for v in ("THORK_TARGET", "THORK_COMPILER", "THORK_SELECTION_RECORD",
              "THORK_TRACED_RECORD"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(_cuda, "gpu_status", lambda: (True, "stubbed"))
    monkeypatch.setattr(GpuTarget, "load",
                        lambda self, art, k: types.SimpleNamespace(artifact=art, kernel=k))
    real = _kernel.Kernel._trace

    def counted(self: Any) -> Any:
        TRACES.append(self.name)
        return real(self)

    monkeypatch.setattr(_kernel.Kernel, "_trace", counted)
    new_process()
    yield
    new_process()


def new_process() -> None:
    _cache.flush_writes()
    _memo.reset()
    reset_plugins()
    _build._TARGETS.clear()
    TRACES.clear()


def build(kernel: Any, **consts: Any) -> tuple[Any, bool]:
    """A new process's first build of ``kernel``'s function: (info, whether it traced)."""
    new_process()
    k = _kernel.Kernel(kernel.fn, name=kernel.name, debug=kernel.debug)
    if consts:
        k = k.specialize(**consts)
    info = k.compile()
    return info, bool(TRACES)


def reference(kernel: Any, **consts: Any) -> str:
    """The key the full path gives (no traced record)."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("THORK_TRACED_RECORD", "0")
        info, traced = build(kernel, **consts)
    assert traced
    return info.key


def hit(kernel: Any, **consts: Any) -> str:
    """Build three times (compile or take, record at a disk hit, then take the record):
    the last must not trace; its key."""
    build(kernel, **consts)
    build(kernel, **consts)
    info, traced = build(kernel, **consts)
    assert not traced, "an unchanged kernel traced again"
    assert info.cache == "disk"
    return info.key


def miss(kernel: Any, old_key: str | None = None, **consts: Any) -> str:
    """The next build must trace and give the reference key (≠ ``old_key``)."""
    info, traced = build(kernel, **consts)
    assert traced, "a changed input took the stale record"
    assert info.key == reference(kernel, **consts)
    if old_key is not None:
        assert info.key != old_key
    return info.key


def module(tmp_path: Path, name: str, source: str) -> types.ModuleType:
    """``source`` as module ``name`` from a file in ``tmp_path`` (imported afresh)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


KERNEL = """
import thork as tk
{head}

@tk.jit
def {name}(out: tk.DevicePointer[tk.dt.{dtype}], a: tk.DevicePointer[tk.dt.{dtype}],
           i: tk.Uint[tk.ThreadIdx]):
    out[i] = {body}
"""


def kernel_module(tmp_path: Path, name: str, body: str = "a[i] * SCALE",
                  head: str = "SCALE = 2.0", dtype: str = "float32") -> types.ModuleType:
    return module(tmp_path, name, KERNEL.format(name=name, body=body, head=head,
                                                dtype=dtype))


# -- hits ------------------------------------------------------------------------------
def test_an_unchanged_kernel_takes_the_record_and_its_key(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_same")
    key = hit(mod.tr_same)
    assert key == reference(mod.tr_same)
    new_process()
    k = _kernel.Kernel(mod.tr_same.fn)
    k.compile()
    assert not TRACES
    assert k.source == mod.tr_same.source  # the recorded IR renders as a fresh trace
    assert [(p.name, p.writes) for p in k.params] == [("out", True), ("a", False)]


def test_a_cold_compile_leaves_the_record_to_the_next_disk_hit(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_cold")
    info, traced = build(mod.tr_cold)
    assert info.cache == "compiled" and traced
    _cache.flush_writes()
    assert not _record_files(tmp_path / "cache")  # the compile paid nothing for it
    info, traced = build(mod.tr_cold)
    assert info.cache == "disk" and traced
    _cache.flush_writes()
    assert len(_record_files(tmp_path / "cache")) == 1
    assert not build(mod.tr_cold)[1]


def test_switched_off(gpu, tmp_path, monkeypatch):
    mod = kernel_module(tmp_path, "tr_off")
    hit(mod.tr_off)
    for var in ("THORK_TRACED_RECORD", "THORK_SELECTION_RECORD"):
        monkeypatch.setenv(var, "0")
        assert build(mod.tr_off)[1], var
        monkeypatch.delenv(var)
    assert not build(mod.tr_off)[1]


# -- every input of the trace ----------------------------------------------------------
def test_a_changed_module_global_misses(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_global")
    old = hit(mod.tr_global)
    mod.SCALE = 3.0
    miss(mod.tr_global, old)
    mod.SCALE = 3  # an int: another constant in the source
    miss(mod.tr_global)
    mod.SCALE = 2.0
    assert hit(mod.tr_global) == old


def test_a_changed_closure_cell_misses(gpu):
    def factory(c: float) -> tuple[Any, Any]:
        def setc(v: float) -> None:
            nonlocal c
            c = v

        @tk.jit
        def tr_closure(out: tk.DevicePointer[tk.dt.float32],
                       a: tk.DevicePointer[tk.dt.float32], i: tk.Uint[tk.ThreadIdx]):
            out[i] = a[i] + c

        return tr_closure, setc

    k, setc = factory(1.5)
    old = hit(k)
    setc(2.5)
    miss(k, old)
    other, _ = factory(4.5)  # a second kernel of the same code: its own record
    miss(other, old)


def test_an_edited_called_func_misses(gpu, tmp_path):
    src = """
import thork as tk

@tk.func
def helper(x):
    return x {op} 1.0

@tk.jit
def tr_func(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
            i: tk.Uint[tk.ThreadIdx]):
    out[i] = helper(a[i])
"""
    mod = module(tmp_path, "tr_func", src.format(op="+"))
    old = hit(mod.tr_func)
    mod2 = module(tmp_path, "tr_func", src.format(op="-"))  # the file edited, re-imported
    new = miss(mod2.tr_func, old)
    # the old module's kernel, its helper replaced in its globals: the new helper's
    # record (the same inputs, so the same trace), never the old one
    mod.helper = mod2.helper
    info, _ = build(mod.tr_func)
    assert info.key == new == reference(mod.tr_func)


def test_a_called_helpers_global_and_default_argument_miss(gpu, tmp_path):
    helpers = module(tmp_path, "tr_helpers", """
K = 3.0

def scale(x, k=2.0):
    return x * k + K
""")
    mod = kernel_module(tmp_path, "tr_helper_user", body="tr_helpers.scale(a[i])",
                        head="import tr_helpers")
    old = hit(mod.tr_helper_user)
    helpers.K = 4.0  # a constant of another user module, read by the called helper
    old = miss(mod.tr_helper_user, old)
    helpers.scale.__defaults__ = (5.0,)  # the helper's default argument
    miss(mod.tr_helper_user, old)


def test_a_user_module_attribute_read_by_the_kernel_misses(gpu, tmp_path):
    consts = module(tmp_path, "tr_consts", "FACTOR = 2.0\n")
    mod = kernel_module(tmp_path, "tr_attr", body="a[i] * tr_consts.FACTOR",
                        head="import tr_consts")
    old = hit(mod.tr_attr)
    consts.FACTOR = 7.0
    miss(mod.tr_attr, old)


def test_each_compile_time_constant_has_its_record(gpu, tmp_path):
    mod = module(tmp_path, "tr_const", """
import thork as tk

@tk.jit
def tr_const(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
             n: tk.Constexpr[int], i: tk.Uint[tk.ThreadIdx]):
    out[i] = a[i] * n
""")
    two = hit(mod.tr_const, n=2)
    three = miss(mod.tr_const, two, n=3)
    assert hit(mod.tr_const, n=2) == two and hit(mod.tr_const, n=3) == three


def test_a_changed_annotation_misses(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_ann")
    old = hit(mod.tr_ann)
    mod2 = kernel_module(tmp_path, "tr_ann", dtype="float64")
    miss(mod2.tr_ann, old)
    # the same function object, its annotations replaced
    from thork_core import dt

    fn = mod.tr_ann.fn
    fn.__annotations__ = dict(fn.__annotations__, a=tk.DevicePointer[dt.float16])
    miss(mod.tr_ann, old)


def test_another_architecture_or_compiler_input_misses(gpu, tmp_path, monkeypatch):
    mod = kernel_module(tmp_path, "tr_arch")
    old = hit(mod.tr_arch)
    monkeypatch.setenv("THORK_ARCH", "sm_80")
    sm80 = miss(mod.tr_arch, old)
    monkeypatch.setenv("THORK_ARCH", "sm_90")
    assert hit(mod.tr_arch) == old
    monkeypatch.setenv("CUDA_HOME", "/nonexistent/cuda-elsewhere")  # declared by NVRTC
    miss(mod.tr_arch)
    assert sm80 != old


def test_a_changed_selection_variable_or_new_distribution_misses(gpu, tmp_path,
                                                                  monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    mod = kernel_module(tmp_path, "tr_select")
    old = hit(mod.tr_select)
    monkeypatch.setenv("THORK_COMPILER", "nvrtc")  # a selection variable set
    miss(mod.tr_select, None)
    monkeypatch.delenv("THORK_COMPILER")
    assert hit(mod.tr_select) == old
    (folder / "outputs.txt").write_text("a script writing next to itself")
    info, traced = build(mod.tr_select)  # same folders, same distributions: still a hit
    assert not traced and info.key == old
    (folder / "thork_other-1.0.dist-info").mkdir()  # a distribution installed there
    assert build(mod.tr_select)[1]


def test_an_edited_plugin_file_misses(gpu, tmp_path, monkeypatch):
    """A file the plugin index lists when the record is made (the index itself changes
    only with such files' stamps or the installed distributions: _plugins)."""
    mod = kernel_module(tmp_path, "tr_plugin")
    with monkeypatch.context() as m:
        m.setenv("THORK_TRACED_RECORD", "0")
        build(mod.tr_plugin)  # the index and the selection record, no traced record yet
    extra = tmp_path / "plugin_file.py"
    extra.write_text("x = 1\n")
    index = _memo.recall(_plugins._INDEX, [_plugins._INDEX_FORMAT])
    first = next(iter(index))
    index[first]["files"].append([str(extra), *_memo.path_fingerprint([str(extra)])[0][1:]])
    _memo.remember(_plugins._INDEX, [_plugins._INDEX_FORMAT], index)
    hit(mod.tr_plugin)  # recorded under the index as it now is
    extra.write_text("x = 22\n")
    assert build(mod.tr_plugin)[1]


def test_installed_files_are_covered_by_their_distribution(tmp_path):
    site = tmp_path / "site"
    (site / "thork_core").mkdir(parents=True)
    (site / "thork_core" / "_ir.py").write_text("")
    (site / "thork_core" / "_new.py").write_text("")
    meta = site / "thork_core-0.1.0.dist-info"
    meta.mkdir()
    (meta / "RECORD").write_text("thork_core/_ir.py,sha256=x,0\nthork_core/__init__.py,,\n")
    _build._RECORDS.clear()
    assert _build._installed(str(site / "thork_core" / "_ir.py"), 1)
    assert not _build._installed(str(site / "thork_core" / "_new.py"), 1)  # not listed
    editable = tmp_path / "src"
    (editable / "thork_core").mkdir(parents=True)
    (editable / "thork_core" / "_ir.py").write_text("")
    assert not _build._installed(str(editable / "thork_core" / "_ir.py"), 1)  # no RECORD
    _build._RECORDS.clear()
    # this checkout's sources (on PYTHONPATH or editable): every loaded file is stamped
    import thork_core

    if not _build._installed(thork_core.__file__, 1):
        files = _build._code_files()
        assert thork_core.__file__ in files and _kernel.__file__ in files


def test_changed_thork_code_misses(gpu, tmp_path, monkeypatch):
    stand_in = tmp_path / "thork_module.py"
    stand_in.write_text("x = 1\n")
    real = _build._code_files
    monkeypatch.setattr(_build, "_code_files", lambda: [*real(), str(stand_in)])
    mod = kernel_module(tmp_path, "tr_code")
    hit(mod.tr_code)
    stand_in.write_text("x = 22\n")  # one of Thork's files edited in place
    assert build(mod.tr_code)[1]


def test_an_unfingerprintable_global_takes_the_full_path(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_unfit", body="a[i] * CFG.scale", head="""
class Config:
    scale = 2.0

CFG = Config()""")
    assert _fingerprint.fingerprint(mod.tr_unfit) is None
    for _ in range(2):
        info, traced = build(mod.tr_unfit)
        assert traced
    mod.CFG.scale = 3.0
    assert build(mod.tr_unfit)[0].key == reference(mod.tr_unfit)


# -- the cache's trust -----------------------------------------------------------------
def _record_files(root: Path) -> list[Path]:
    """The traced records' entry files (their signed metadata says ``"kind": "traced"``)."""
    return [p for p in root.glob("*/*.art") if b'"kind": "traced"' in p.read_bytes()]


def test_a_tampered_record_is_not_used(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_tamper")
    key = hit(mod.tr_tamper)
    files = _record_files(tmp_path / "cache")
    assert len(files) == 1
    blob = bytearray(files[0].read_bytes())
    i = blob.rindex(b"tr_tamper")
    blob[i] ^= 1  # in the pickled IR (a Loc of the kernel's file)
    files[0].write_bytes(bytes(blob))
    info, traced = build(mod.tr_tamper)
    assert traced and info.key == key
    assert _cache.disk_cache().stats["corrupt"] >= 1


def test_a_record_signed_with_another_secret_is_not_used(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_forged")
    key = hit(mod.tr_forged)
    (path,) = _record_files(tmp_path / "cache")
    blob = path.read_bytes()
    forged = _cache._encode(_cache._decode(blob, path.stem, _cache._secret(
        str(tmp_path / "cache")))[0], path.stem, os.urandom(32), None)
    path.write_bytes(forged)
    info, traced = build(mod.tr_forged)
    assert traced and info.key == key


def test_threads_taking_the_record_agree(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_threads")
    key = hit(mod.tr_threads)
    new_process()
    k = _kernel.Kernel(mod.tr_threads.fn)
    got: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def first() -> None:
        try:
            start.wait()
            got.append(k.compile().key)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == [key] * 8 and not TRACES


# -- the partial IR (what a launch reads; the body when asked) --------------------------
def test_a_hit_gives_a_partial_ir_that_completes_to_the_traced_one(gpu, tmp_path):
    import copy
    import pickle

    mod = kernel_module(tmp_path, "tr_partial")
    hit(mod.tr_partial)
    full = mod.tr_partial.ir  # traced in this process
    new_process()
    k = _kernel.Kernel(mod.tr_partial.fn)
    k.compile()
    ir = k._ir
    assert not TRACES and "_rest" in ir.__dict__  # the body was not unpickled
    assert (ir.name, ir.params, ir.launch_bounds, ir.cluster_dims, ir.cooperative) \
        == (full.name, full.params, full.launch_bounds, full.cluster_dims, full.cooperative)
    assert "_rest" in ir.__dict__  # reading what a launch reads keeps it partial
    # (expression nodes compare by identity: the whole kernels are compared by repr)
    assert repr(pickle.loads(pickle.dumps(ir))) == repr(full)  # pickling sees all of it
    assert "_rest" not in ir.__dict__ and repr(ir) == repr(full)
    assert k.source == mod.tr_partial.source
    new_process()
    k2 = _kernel.Kernel(mod.tr_partial.fn)
    k2.compile()
    assert "_rest" in k2._ir.__dict__
    assert repr(copy.deepcopy(k2._ir)) == repr(full) and not hasattr(k2._ir, "no_such")


def test_threads_completing_a_partial_ir_agree(gpu, tmp_path):
    mod = kernel_module(tmp_path, "tr_partial_threads")
    hit(mod.tr_partial_threads)
    want = mod.tr_partial_threads.ir.body
    for _ in range(3):
        new_process()
        k = _kernel.Kernel(mod.tr_partial_threads.fn)
        k.compile()
        ir = k._ir
        assert "_rest" in ir.__dict__
        got: list[Any] = []
        start = threading.Barrier(8)

        def read(ir: Any = ir, start: Any = start, got: list[Any] = got) -> None:
            start.wait()
            got.append((ir.body, ir.loc, ir.functions))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 8 and all(g[0] is got[0][0] for g in got)
        assert repr(got[0][0]) == repr(want)


def test_a_launch_view_is_kept_only_where_it_is_all_a_launch_reads(gpu, tmp_path):
    from thork_core import KernelIR
    from thork_core.ir import Param, VectorType

    mod = kernel_module(tmp_path, "tr_view")
    ir = mod.tr_view.ir
    view = _build._launch_view(ir)
    assert view is not None and view[0] == "tr_view"
    assert _build._partial_ir(view, b"").params == ir.params
    debug = KernelIR(ir.name, ir.params, ir.body, ir.loc, debug_sites=[])
    assert _build._launch_view(debug) is None  # debug mode: the whole IR
    odd = KernelIR("odd", [Param("v", VectorType(tk.dt.float32, 4))], [], None)
    assert _build._launch_view(odd) is None  # a vector parameter: the whole IR


def test_parameters_read_from_the_code_object_match_inspect():
    import functools
    import inspect

    def a(x, y=2, *, z, w=4): ...
    def b(p, /, q, r=3): ...
    def c(): ...
    def d(x=1, y=None): ...
    def e(x, *, y=tk): ...

    @functools.wraps(a)
    def wrapped(*args: Any, **kw: Any) -> None: ...

    def want(fn: Any) -> list[tuple[str, Any]]:
        return [(n, p.default if p.default is not p.empty else _kernel._EMPTY)
                for n, p in inspect.signature(fn).parameters.items()]

    for fn in (a, b, c, d, e, wrapped):
        assert _kernel._parameters(fn, "k") == want(fn), fn
    for bad in (lambda *a: None, lambda **k: None, lambda x, *a, y=1: None):
        with pytest.raises(tk.TraceError, match="args"):
            _kernel._parameters(bad, "k")


# -- the fingerprint itself ------------------------------------------------------------
def test_fingerprints_tell_value_types_apart(tmp_path):
    mod = kernel_module(tmp_path, "tr_types")
    digests = set()
    values = (1, 1.0, True, "1", b"1", (1,), [1], {1: 1}, {1}, None, 1 + 0j, np.float32(1),
              np.int32(1), np.arange(3), np.arange(3.0), -0.0, 0.0)
    for value in values:
        mod.SCALE = value
        fp = _fingerprint.fingerprint(mod.tr_types)
        assert fp is not None, value
        digests.add(fp)
    assert len(digests) == len(values)
    mod.SCALE = 2.0
    again = kernel_module(tmp_path, "tr_types")  # the same source, imported again
    assert _fingerprint.fingerprint(again.tr_types) == _fingerprint.fingerprint(mod.tr_types)


def test_impure_calls_make_a_kernel_unfingerprintable(tmp_path):
    """A trace that may differ between processes, or prints, always runs."""
    for head, body in (("import time", "a[i] * time.time()"),
                       ("import os", "a[i] * len(os.urandom(2))"),
                       ("", "a[i] * (hash('x') % 2)"),
                       ("import random", "a[i] * random.random()"),
                       ("import os", "a[i] * float(os.environ.get('X', '1'))"),
                       ("import os", "a[i] * float(os.getenv('X', '1'))")):
        mod = kernel_module(tmp_path, "tr_impure", body=body, head=head)
        assert _fingerprint.fingerprint(mod.tr_impure) is None, body
    fine = kernel_module(tmp_path, "tr_pure", body="a[i] * math.sqrt(len([1, 2]))",
                         head="import math")
    assert _fingerprint.fingerprint(fine.tr_pure) is not None


def test_fingerprints_of_cycles_terminate(tmp_path):
    mod = kernel_module(tmp_path, "tr_cycle", body="even(3) * a[i]", head="""
import sys

def even(n):
    return 1.0 if n == 0 else odd(n - 1)

def odd(n):
    return 0.0 if n == 0 else even(n - 1)

ME = sys.modules[__name__]""")
    assert _fingerprint.fingerprint(mod.tr_cycle) is not None


# -- on the GPU ------------------------------------------------------------------------
GPU_SRC = """
import thork as tk
SCALE = {scale}

@tk.jit
def tr_gpu(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
           n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx]):
    i = bid * 128 + tid
    with tk.if_(i < n):
        out[i] = a[i] * SCALE + 1.0
"""


@pytest.mark.gpu
def test_gpu_launches_from_the_record_match_numpy(tmp_path, monkeypatch, rng):
    from thork_core import DeviceArray

    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("THORK_TRACED_RECORD", raising=False)
    n = 1000 + int(rng.integers(0, 77))
    a = rng.standard_normal(n).astype(np.float32)
    mod = module(tmp_path, "tr_gpu", GPU_SRC.format(scale=2.5))
    traced: list[str] = []
    real = _kernel.Kernel._trace

    def counted(self: Any) -> Any:
        traced.append(self.name)
        return real(self)

    monkeypatch.setattr(_kernel.Kernel, "_trace", counted)
    # The record rests on the selection record, kept only for a compiler that declares its
    # key inputs (NVRTC does; nvcc and clang do not): without one every process traces.
    from thork_core.build import choose

    declared = choose("gpu", None)[1].key_inputs() is not None
    for scale, want_trace in ((2.5, True), (2.5, True), (2.5, not declared), (-3.0, True),
                              (-3.0, True), (-3.0, not declared)):
        mod.SCALE = scale
        new_process()
        traced.clear()
        k = _kernel.Kernel(mod.tr_gpu.fn)
        out = DeviceArray.from_host(np.full(n, np.nan, np.float32))
        k[(n + 127) // 128, 128](out, DeviceArray.from_host(a), n)
        got = out.to_host()
        assert bool(traced) == want_trace, (scale, want_trace)
        assert k.compile_info is not None and k.compile_info.cache in ("compiled", "disk")
        # (the GPU may fuse the multiply-add: compared in float64 with float32 tolerances)
        np.testing.assert_allclose(got, a.astype(np.float64) * scale + 1, rtol=1e-6,
                                   atol=1e-6)
