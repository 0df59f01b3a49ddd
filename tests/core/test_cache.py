"""The two-level cache: memory per kernel, disk across processes; atomic, self-checking."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import thork as tk
from helpers import TARGETS
from thork_core import Artifact, DiskCache, cache_key, disk_cache

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import thork as tk
    from thork_core import disk_cache
    from thork_core._native import native_module

    # The native launch module is a cache entry too (looked up, or built and written, on
    # first use): count from after it, so the numbers printed are the kernel's alone.
    native_module()
    before = dict(disk_cache().stats)

    @tk.jit
    def scale(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
              k: tk.dt.float32, tid: tk.Uint[tk.ThreadIdx], bid: tk.Uint[tk.BlockIdx],
              bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        out[i] = a[i] * k

    a = np.arange(256, dtype=np.float32)
    out = np.zeros_like(a)
    scale[2, 128](out, a, 3.0, target=sys.argv[1])
    ok = bool(np.array_equal(out, a * 3))
    stats = {k: v - before[k] for k, v in disk_cache().stats.items()}
    from thork_core.build import choose
    declared = choose(sys.argv[1], None)[1].key_inputs() is not None
    print(json.dumps({"cache": scale.compile_info.cache, "ok": ok, "declared": declared,
                      **stats}))
""")


def run_script(tmp_path, cache_dir, target):
    script = tmp_path / "scale_kernel.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, THORK_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, str(script), target], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_hits_disk_cache(tmp_path, target):
    cache = tmp_path / "cache"
    first = run_script(tmp_path, cache, target)
    second = run_script(tmp_path, cache, target)
    third = run_script(tmp_path, cache, target)
    assert first["ok"] and second["ok"] and third["ok"]
    assert first["cache"] == "compiled" and first["writes"] == 1 and first["hits"] == 0
    # On the GPU the first disk hit also writes the kernel's traced record (docs/cache.md)
    # and later processes read that one entry (the module image travels in it): where the
    # compiler declares its key inputs (NVRTC; not nvcc or clang), as the record needs.
    recorded = 1 if target == "gpu" and second["declared"] else 0
    assert second["cache"] == "disk" and second["hits"] == 1 and second["writes"] == recorded
    assert third["cache"] == "disk" and third["hits"] == 1 and third["writes"] == 0


def test_two_processes_compiling_at_once_both_succeed(tmp_path, target):
    script = tmp_path / "scale_kernel.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, str(script), target], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["ok"]
    # Exactly one well-formed entry remains and no temporary files are left behind.
    # (the native launch module, where a GPU launch built it, is an entry of its own)
    # (a traced record, written by a process that found the entry, is an entry of its own)
    entries = [e for e in DiskCache(tmp_path / "cache").entries()
               if e.entry == "scale" and e.kind != "traced"]
    assert len(entries) == 1
    assert not list((tmp_path / "cache").glob("*/.tmp-*"))


def _fresh_kernel():
    @tk.jit
    def plus_one(out: tk.DevicePointer[tk.dt.int32], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = tid + 1

    return plus_one


def _kernel_entries() -> list:
    """The cache's entries but the native launch module's (an entry too, written when a
    process first needs it)."""
    return [e for e in disk_cache().entries() if not e.key.startswith("native-")]


def test_truncated_entry_is_rebuilt(tmp_path, monkeypatch, target):
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    k = _fresh_kernel()
    k.compile(target)
    assert k.compile_info.cache == "compiled"
    (entry,) = _kernel_entries()
    data = entry.path.read_bytes()
    entry.path.write_bytes(data[: len(data) // 2])  # a crash mid-write, or a bad disk
    before = dict(disk_cache().stats)
    k2 = _fresh_kernel()
    out = np.zeros(40, np.int32)
    k2[1, 40](out, target=target)
    np.testing.assert_array_equal(out, np.arange(1, 41))
    assert k2.compile_info.cache == "compiled"
    assert disk_cache().stats["corrupt"] == before["corrupt"] + 1
    (entry2,) = _kernel_entries()
    assert entry2.path.stat().st_size == len(data)  # the entry file (size adds its library)


def test_memory_cache_reuses_executable(target):
    k = _fresh_kernel()
    out = np.zeros(8, np.int32)
    k[1, 8](out, target=target)
    exe = k._exes[(target, None)][0]
    k[1, 8](out, target=target)
    assert k._exes[(target, None)][0] is exe


def test_corrupt_bytes_fail_the_checksum(tmp_path):
    c = DiskCache(tmp_path)
    art = Artifact(kind="cubin", data=b"\x7fELF" + os.urandom(100), entry="k",
                   compiler="x-1", arch="sm_90")
    c.put("ab" * 32, art)
    assert c.get("ab" * 32) == art
    path = next(tmp_path.glob("*/*.art"))
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0xFF
    path.write_bytes(bytes(blob))
    assert c.get("ab" * 32) is None
    assert not path.exists()
    assert c.stats["corrupt"] == 1


def test_key_covers_source_compiler_flags_kind_arch():
    base = cache_key("src", "nvrtc-13.0", ["-O3"], "cubin", "sm_90")
    assert len({base,
                cache_key("src2", "nvrtc-13.0", ["-O3"], "cubin", "sm_90"),
                cache_key("src", "nvrtc-13.1", ["-O3"], "cubin", "sm_90"),
                cache_key("src", "nvrtc-13.0", ["-O2"], "cubin", "sm_90"),
                cache_key("src", "nvrtc-13.0", ["-O3"], "ptx", "sm_90"),
                cache_key("src", "nvrtc-13.0", ["-O3"], "cubin", "sm_80")}) == 6


@pytest.mark.plugin("nvrtc")
def test_cubin_cached_across_processes_without_gpu(tmp_path):
    script = tmp_path / "cubin.py"
    script.write_text(SCRIPT.split("a = np.arange")[0] + textwrap.dedent("""
        import time
        art = scale.artifact("sm_90")
        stats = {k: v - before[k] for k, v in disk_cache().stats.items()}
        print(json.dumps({**stats, "n": len(art.data)}))
    """))
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "c"))
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert outs[0]["writes"] == 1 and outs[1]["hits"] == 1 and outs[1]["writes"] == 0
    assert outs[0]["n"] == outs[1]["n"] > 0


@pytest.mark.skipif(not TARGETS, reason="no target installed")
def test_thork_cache_cli_lists_and_clears(tmp_path, monkeypatch, capsys):
    from thork_core._cli import main

    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path))
    _fresh_kernel().compile(None)
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "plus_one" in out and "kernels" in out
    assert main(["cache", "clear"]) == 0
    assert "removed " in capsys.readouterr().out
    assert disk_cache().entries() == []
