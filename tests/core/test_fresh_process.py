"""A disk-cache hit in a fresh process imports only what it needs: the plugin of its target
and compiler, not the others (their modules stay out of ``sys.modules``), and neither the
entry-point scan nor the compiler's heavy module (memoized). Timing is the bench's job
(``bench/bench_core.py``); these tests check what was imported."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import TARGETS, run_python

SCRIPT = textwrap.dedent("""
    import json, sys
    import thork as tk
    from thork_core import plugins

    @tk.jit
    def add(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
            tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = a[tid] + 1.0

    reads = []
    if sys.argv[1] == "cubin":
        art = add.artifact("sm_90")
        cache = "disk" if __import__("thork_core").disk_cache().stats["hits"] else "compiled"
    elif sys.argv[1] == "call":  # the first call on the CPU target: build, load, launch
        import numpy as np
        from thork_core import _cache

        read = _cache.read_private

        def counted(path, limit):  # every file the cache reads, in order
            reads.append(path)
            return read(path, limit)

        _cache.read_private = counted
        a = np.arange(5, dtype=np.float32)
        out = np.zeros(5, np.float32)
        add[1, 5](out, a, target="cpu")
        assert np.array_equal(out, a + 1)
        cache = add.compile_info.cache
    else:
        cache = add.compile(sys.argv[1]).cache
    print(json.dumps({"cache": cache, "loaded": plugins().loaded(),
                      "modules": sorted(sys.modules), "reads": reads}))
""")

#: Top-level packages of the plugins a given run must not import.
OTHERS = {
    "cpu": ("thork_clang", "thork_nvcc", "thork_nvrtc", "fkl"),
    "call": ("thork_clang", "thork_nvcc", "thork_nvrtc", "fkl", "thork_torch"),
    "cubin": ("thork_clang", "thork_nvcc", "thork_cpu", "fkl"),
}


def run_twice(tmp_path, what):
    """Run the script in two fresh processes sharing one cache: a miss, then a hit."""
    (tmp_path / "s").mkdir()
    script = tmp_path / "s" / "fresh.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "c"))
    for var in ("THORK_TARGET", "THORK_COMPILER", "THORK_DISABLE_PLUGINS",
                "THORK_PLUGINS_AUTOLOAD"):
        env.pop(var, None)
    out = []
    for _ in range(2):
        r = subprocess.run([sys.executable, str(script), what], capture_output=True,
                           text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert out[0]["cache"] == "compiled" and out[1]["cache"] == "disk"
    return out[1]


def check_imports(hit, what, plugin, *more):
    assert hit["loaded"] == [*more, plugin], hit["loaded"]
    imported = {m.split(".")[0] for m in hit["modules"]}
    unrelated = sorted(imported & set(OTHERS[what]))
    assert not unrelated, f"a {what} cache hit imported unrelated plugins: {unrelated}"
    # The entry points came from the memo, not from scanning the installed distributions.
    assert "importlib.metadata" not in hit["modules"]


@pytest.mark.plugin("cpu")
@pytest.mark.skipif("cpu" not in TARGETS, reason="the CPU target is not available here")
def test_cpu_cache_hit_imports_only_the_cpu_plugin(tmp_path):
    hit = run_twice(tmp_path, "cpu")
    check_imports(hit, "cpu", "cpu")


@pytest.mark.plugin("nvrtc")
def test_cubin_cache_hit_imports_only_nvrtc_and_not_nvrtc_itself(tmp_path):
    hit = run_twice(tmp_path, "cubin")
    check_imports(hit, "cubin", "nvrtc")
    # The cache key needs NVRTC's version, memoized: the library itself is not loaded.
    assert "cuda.bindings.nvrtc" not in hit["modules"]


@pytest.mark.plugin("cpu")
@pytest.mark.skipif("cpu" not in TARGETS, reason="the CPU target is not available here")
def test_first_call_on_a_cache_hit_reads_each_library_once(tmp_path):
    """The first ``kernel[...](arrays)`` call of a fresh process (issue 11's cache-hit
    measure, CPU target): only the CPU plugin (and core's built-ins) are imported (the array adapters of other
    plugins, torch's among them, are not: NumPy arrays are core's), and each library file
    (the kernel's, the native launch module's) is read once: the disk cache's content
    check, which loading reuses instead of reading and hashing the bytes again."""
    hit = run_twice(tmp_path, "call")
    check_imports(hit, "call", "cpu", "core")  # core's own plugin: the NumPy adapter
    libs = [p for p in hit["reads"] if p.endswith(".so")]
    assert libs, hit["reads"]  # the kernel's library came from the cache, checked
    assert len(libs) == len(set(libs)), f"a library was read twice: {hit['reads']}"


#: What ``import thork`` must not load (issue 11: ``import thork`` <= 30 ms after NumPy):
#: debug mode, the NumPy staging lanes and what only they or a guessed module load need;
#: the build and launch path (``tk.jit`` loads it, where the first kernel is defined); the
#: runtime's arrays, graphs and memory (loaded by their names); the stdlib modules only
#: those need (OpenSSL's hashlib alone was ~3 ms on the H200's host, dataclasses ~1 ms).
NOT_AT_IMPORT = (
    "thork_core._debug", "thork_core._staging", "concurrent.futures", "logging", "queue",
    "thork._kernel", "thork._cooperative", "thork_core._build", "thork_core._cache",
    "thork_core._memo", "thork_core._plugins", "thork_core._selection",
    "thork_core._hookspecs", "thork_core._plugin_api", "thork_core._renderer",
    "thork_core._hopper", "thork_core._target", "thork_core._artifact",
    "thork_core._compiler", "thork_core._frontend", "thork_core._adapter",
    "thork_core._launch", "thork_core._probe", "thork_core._binding", "thork_core._limits",
    "thork_core._prefetch", "thork_core._native", "thork_core._device_array",
    "thork_core._device", "thork_core._cuda", "thork_core._graph", "thork_core._memory",
    "thork_core._pitched_array", "thork_core._gpu", "thork_core._env",
    "thork_core.launch", "thork_core.runtime", "thork_core.plugin", "thork_core.build",
    "hashlib", "_hashlib", "hmac", "json", "dataclasses", "copy", "importlib.metadata",
)


def test_import_thork_leaves_the_build_path_debug_mode_and_staging_lanes_unloaded():
    # import thork's time is an issue-11 goal (<= 30 ms): what only kernels, debug mode,
    # NumPy staging lanes or a guessed module load need is imported on first use.
    code = ("import sys, thork; print(sorted(m for m in sys.argv[1:] if m in sys.modules))")
    out = run_python(code, *NOT_AT_IMPORT, env={**os.environ, "THORK_DEBUG": ""}).strip()
    assert out == "[]", f"import thork loaded {out}"
    # ... and they still load where they are used: tk.jit brings the build and launch
    # path, the lazy names of thork, thork_core and thork_core.ir resolve to the real ones.
    code = textwrap.dedent("""
        import sys, thork as tk, thork_core, thork_core.ir as ir
        jit = tk.jit
        assert "thork._kernel" in sys.modules and "thork_core._build" in sys.modules
        import thork._kernel, thork_core._graph, thork_core._memory, thork_core._renderer
        assert jit is thork._kernel.jit and tk.Kernel is thork._kernel.Kernel
        assert tk.graph is tk.Graph is thork_core.Graph is thork_core._graph.Graph
        assert tk.pinned_empty is thork_core._memory.pinned_empty
        assert ir.CudaRenderer is thork_core.CudaRenderer is thork_core._renderer.CudaRenderer
        for mod in (tk, thork_core, ir):  # every public name resolves, and dir() lists it
            assert all(getattr(mod, n) is not None for n in mod.__all__), mod
            assert set(mod.__all__) <= set(dir(mod)), mod
        for mod, name in ((tk, "no_such_name"), (thork_core, "nope"), (ir, "nope")):
            try:
                getattr(mod, name)
            except AttributeError as e:
                assert name in str(e)
            else:
                raise AssertionError(name)
        rt = __import__("thork_core.runtime", fromlist=["x"])
        print(thork_core.debug_default(), callable(rt.configure_staging),
              "thork_dbg_rec" in ir.RECORD_STRUCT)
    """)
    assert run_python(code, env={**os.environ, "THORK_DEBUG": "1"}).split() == \
        ["True", "True", "True"]

