"""A fresh process's first launch starts loading its guessed module early
(``thork_core._prefetch``): the guess is used only when the full path computes the same
cache key, so a kernel whose module global, closure cell, called ``@tk.func``, default or
source changed since the record was written gets its new artifact, never the old one.

The CPU-runnable tests run each process with the CUDA driver replaced by a stand-in that
records what is loaded (NVRTC compiles for sm_90; nothing runs); the ``[gpu]`` test runs
the same sequence on the device and checks the results. (The guess is off by default:
``THORK_PREFETCH=1`` here.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

#: The kernel module: what it computes depends on THORK_T_* variables, read at import, so
#: each process can change one fact the trace depends on.
KERNELS = textwrap.dedent("""
    import os
    import thork as tk

    SCALE = float(os.environ.get("THORK_T_SCALE", "1"))       # a module global

    @tk.func
    def twice(x):
        if os.environ.get("THORK_T_FUNC", "a") == "a":        # a called @tk.func's body
            return x * 2.0
        return x * 4.0

    def make(offset):
        @tk.jit
        def add(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
                tid: tk.Uint[tk.ThreadIdx]):
            out[tid] = twice(a[tid]) * SCALE + offset          # a closure cell
        return add

    add = make(float(os.environ.get("THORK_T_CLOSURE", "0")))
""")

STUBBED = textwrap.dedent("""
    import ctypes, json, sys, time
    sys.path.insert(0, sys.argv[1])
    from thork_core import DeviceArray, _cuda, _prefetch

    NOOP = ctypes.cast(ctypes.CDLL(None).sched_yield, ctypes.c_void_p).value
    loads = []          # (thread, data) of every module load

    class _Attr:
        def __getattr__(self, name):
            return name

    class FakeDriver:
        CUfunction_attribute = CUdevice_attribute = CUpointer_attribute = _Attr()
        CUresult = CUmodule = CUfunction = int
        def cuInit(self, flags): return (0,)
        def cuDeviceGetCount(self): return (0, 1)
        def cuDeviceGet(self, i): return (0, i)
        def cuDeviceGetAttribute(self, attr, dev):
            return (0, 9 if attr.endswith("MAJOR") else 0)
        def cuDevicePrimaryCtxRetain(self, dev): return (0, 4096)
        def cuCtxSetCurrent(self, ctx): return (0,)
        def cuModuleLoadData(self, data):
            loads.append(("main", bytes(data)))
            return (0, 8192)
        def cuModuleGetFunction(self, mod, name): return (0, 12288)
        def cuFuncGetAttribute(self, attr, fn): return (0, 0)

    fake = FakeDriver()
    _cuda.driver = lambda: fake
    _cuda.gpu_status = lambda: (True, "stubbed")
    _cuda.device_count = lambda: 1
    _cuda.function_address = lambda name: NOOP
    unloaded = []

    def load_module(load, ctx):  # the guess's thread: record, answer as the driver would
        loads.append(("guess", load.artifact.data))
        load.module, load.function = 8193, 12289

    def unload(load):
        unloaded.append(load.key)
        load.module = 0

    _prefetch._load_module = load_module
    _prefetch._unload = unload
    if sys.argv[2] == "context":
        _cuda.context(0)  # the user's arrays would have made it
    from kernels import add
    buf = (ctypes.c_float * 64)()
    a = DeviceArray.wrap(ctypes.addressof(buf), (32,), "float32")
    out = DeviceArray.wrap(ctypes.addressof(buf) + 128, (32,), "float32")
    add[1, 32](out, a)
    info = add.compile_info
    exe = add._exes[(None, None)][0]
    print(json.dumps({"key": info.key, "cache": info.cache, "guessed": add._pre_key,
                      "prefetched": exe.prefetched, "unloaded": unloaded,
                      "loads": [(who, len(data)) for who, data in loads],
                      "threads": sorted(t.name for t in __import__("threading").enumerate())}))
""")


def _env(tmp_path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "cache"), THORK_ARCH="sm_90",
               THORK_PREFETCH="1")
    for var in ("THORK_TARGET", "THORK_COMPILER", "THORK_CACHE_BUNDLE"):
        env.pop(var, None)
    env.update(extra)
    return env


def _run(tmp_path, script: str, *args: str, **extra: str) -> dict:
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "child.py").write_text(script)
    r = subprocess.run([sys.executable, str(tmp_path / "child.py"), str(tmp_path), *args],
                       capture_output=True, text=True, env=_env(tmp_path, **extra),
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _records(tmp_path) -> list[str]:
    folder = tmp_path / "cache" / "pre"
    return sorted(p.read_text() for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.plugin("nvrtc")
def test_a_matching_guess_is_the_module_the_first_launch_uses(tmp_path):
    first = _run(tmp_path, STUBBED, "context")
    assert first["cache"] == "compiled" and first["guessed"] is None
    assert not first["prefetched"] and [w for w, _ in first["loads"]] == ["main"]
    assert _records(tmp_path) == [first["key"]]  # the record names the built key
    second = _run(tmp_path, STUBBED, "context")
    assert second["cache"] == "disk" and second["key"] == first["key"]
    assert second["guessed"] == first["key"] and second["prefetched"]
    # loaded once, by the guess's thread; nothing loaded on the calling thread
    assert [w for w, _ in second["loads"]] == ["guess"] and second["unloaded"] == []
    assert _records(tmp_path) == [first["key"]]


@pytest.mark.plugin("nvrtc")
@pytest.mark.parametrize("change", [{"THORK_T_SCALE": "3"}, {"THORK_T_CLOSURE": "5"},
                                    {"THORK_T_FUNC": "b"}],
                         ids=["module-global", "closure-cell", "called-func"])
def test_a_stale_guess_is_unloaded_and_never_used(tmp_path, change):
    """The record names the key of the kernel as it was; the kernel now traces to other
    code: the guess's module is loaded on its thread, not taken, and unloaded; the first
    launch loads the new artifact; the record is rewritten."""
    old = _run(tmp_path, STUBBED, "context")
    new = _run(tmp_path, STUBBED, "context", **change)
    assert new["key"] != old["key"] and new["cache"] == "compiled"
    assert new["guessed"] == old["key"] and not new["prefetched"]
    assert [w for w, _ in new["loads"]] == ["guess", "main"]
    assert new["unloaded"] == [old["key"]]
    assert _records(tmp_path) == [new["key"]]
    back = _run(tmp_path, STUBBED, "context")  # the old kernel again: a hit, not guessed
    assert back["key"] == old["key"] and back["cache"] == "disk"
    assert back["guessed"] == new["key"] and not back["prefetched"]
    assert back["unloaded"] == [new["key"]]


@pytest.mark.plugin("nvrtc")
@pytest.mark.parametrize("case", ["no-context", "off", "damaged", "foreign"])
def test_no_guess_where_it_must_not_start(tmp_path, case):
    """No context held (a first call never creates one for a guess), THORK_PREFETCH=0, a
    damaged record, a record that is not this user's private file: no guess, same
    result."""
    first = _run(tmp_path, STUBBED, "context")
    (record,) = (tmp_path / "cache" / "pre").iterdir()
    extra = {}
    if case == "off":
        extra["THORK_PREFETCH"] = "0"
    elif case == "damaged":
        record.write_text("not a key")
    elif case == "foreign":
        record.chmod(0o666)  # writable by others: the cache refuses to read it
    got = _run(tmp_path, STUBBED, "context" if case != "no-context" else "none", **extra)
    assert got["key"] == first["key"] and got["cache"] == "disk"
    assert not got["prefetched"] and [w for w, _ in got["loads"]] == ["main"]
    if case == "no-context":
        assert got["guessed"] == first["key"]  # read, not started
    if case in ("damaged", "foreign"):
        assert got["guessed"] is None


@pytest.mark.plugin("nvrtc")
def test_a_guess_reads_only_what_thork_wrote(tmp_path):
    """A record naming a key whose entry was replaced by a foreign file: the disk cache's
    check refuses the entry, no guess is loaded."""
    first = _run(tmp_path, STUBBED, "context")
    key = first["key"]
    entry = tmp_path / "cache" / key[:2] / f"{key}.art"
    blob = entry.read_bytes()
    entry.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))  # payload changed: HMAC fails
    got = _run(tmp_path, STUBBED, "context")
    assert not got["prefetched"] and "guess" not in [w for w, _ in got["loads"]]
    assert got["cache"] == "compiled" and got["key"] == key


GPU_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from thork_core import DeviceArray
    from kernels import add
    a = np.random.default_rng(int(sys.argv[2])).random(32, dtype=np.float32)
    da, out = DeviceArray.from_host(a), DeviceArray.from_host(np.full(32, np.nan, np.float32))
    add[1, 32](out, da)
    exe = add._exes[(None, None)][0]
    print(json.dumps({"out": out.to_host().tolist(), "a": a.tolist(),
                      "prefetched": exe.prefetched, "cache": add.compile_info.cache}))
""")


@pytest.mark.gpu
@pytest.mark.plugin("nvrtc")
def test_gpu_guessed_module_runs_and_a_changed_kernel_gets_its_own(tmp_path):
    def check(got, scale, offset):
        a = np.array(got["a"], np.float32)
        np.testing.assert_allclose(got["out"], a * 2 * scale + offset, rtol=1e-6)

    seed = int.from_bytes(os.urandom(2), "little")
    first = _run(tmp_path, GPU_CHILD, str(seed))
    check(first, 1, 0)
    assert first["cache"] == "compiled" and not first["prefetched"]
    hit = _run(tmp_path, GPU_CHILD, str(seed + 1))
    check(hit, 1, 0)
    assert hit["cache"] == "disk" and hit["prefetched"]
    changed = _run(tmp_path, GPU_CHILD, str(seed + 2), THORK_T_SCALE="3",
                   THORK_T_CLOSURE="0.5")
    check(changed, 3, 0.5)
    assert not changed["prefetched"]
    again = _run(tmp_path, GPU_CHILD, str(seed + 3), THORK_T_SCALE="3",
                 THORK_T_CLOSURE="0.5")
    check(again, 3, 0.5)
    assert again["prefetched"]


def _fake_driver(fail: str = ""):
    """Four ctypes callbacks standing for cuCtxSetCurrent, cuModuleLoadData,
    cuModuleGetFunction and cuFuncGetAttribute, recording their calls; ``fail`` names
    the one that returns an error (CUresult 218 or 500)."""
    import ctypes

    vp = ctypes.c_void_p
    calls: list[tuple] = []

    @ctypes.CFUNCTYPE(ctypes.c_int, vp)
    def ctx_set(ctx):
        calls.append(("ctx", ctx))
        return 201 if fail == "ctx" else 0

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(vp), ctypes.c_char_p)
    def load(out, image):
        calls.append(("load", image))
        if fail == "load":
            return 218
        out[0] = 0x5000
        return 0

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(vp), vp, ctypes.c_char_p)
    def get(out, module, name):
        calls.append(("get", module, name))
        if fail == "get":
            return 500
        out[0] = 0x6000
        return 0

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int, vp)
    def attr(out, which, function):
        calls.append(("attr", which, function))
        if which == 3:  # LOCAL_SIZE_BYTES unreadable: left out
            return 1
        out[0] = 100 + which
        return 0

    fns = tuple(ctypes.cast(f, vp).value for f in (ctx_set, load, get, attr))
    return fns, calls, (ctx_set, load, get, attr)


@pytest.mark.parametrize("fail", ["", "ctx", "load", "get"])
def test_native_loader_makes_the_driver_calls_in_one_call(fail):
    """The native module's ``load_module`` (the guess's one GIL-free call): the context,
    the image, the entry and the four attributes in order; the first failing call's code
    stops it, with what was loaded before (unloaded by the caller)."""
    from thork_core._native import native_module

    mod = native_module()
    if mod is None:
        pytest.skip("no native launch module here")
    fns, calls, _keep = _fake_driver(fail)
    image = bytes(np.random.default_rng().integers(1, 255, 77, dtype=np.uint8))
    err, module, function, values = mod.load_module(fns, 0x4000, image, b"my_kernel")
    assert calls[0] == ("ctx", 0x4000)
    if fail == "ctx":
        assert (err, module, function, values, len(calls)) == (201, 0, 0, (-1,) * 4, 1)
        return
    assert calls[1] == ("load", image)
    if fail == "load":
        assert (err, module, function, len(calls)) == (218, 0, 0, 2)
        return
    assert calls[2] == ("get", 0x5000, b"my_kernel")
    if fail == "get":
        assert (err, module, function, values) == (500, 0x5000, 0, (-1,) * 4)
        return
    assert (err, module, function) == (0, 0x5000, 0x6000)
    assert [c[1] for c in calls[3:]] == [4, 1, 3, 0] and {c[2] for c in calls[3:]} == {0x6000}
    assert values == (104, 101, -1, 100)
    for bad in [((1, 2, 3), 0, b"", b""), ((1, 2, 3, 0), 0, b"", b""),
                (fns, 0, "text", b"x")]:
        with pytest.raises((TypeError, ValueError), match="load_module"):
            mod.load_module(*bad)
