"""The cache trusts only what Thork wrote (docs/guarantees.md, "Cache trust"): each fault a
local attacker or a damaged disk can produce — a planted library, a forged or swapped
entry, a symlink or FIFO in place of an entry, a truncated file, a read-only, missing,
foreign or world-writable folder, a compiler wrapper switched under the same ``--version``
— is rejected and rebuilt (or the folder replaced by a private one), never loaded and never
fatal. Plus the size limit's LRU eviction and one compile for concurrent processes.

Loading happens in fresh processes where a tampered file must be looked at: a process that
already ``dlopen``-ed a path gets the old mapping back whatever the file now holds.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
import thork as tk
from thork_core import Artifact, DiskCache, _cache
from thork_core._cache import CacheWarning, disk_cache

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import thork as tk
    from thork_core import disk_cache

    @tk.jit
    def plus_one(out: tk.DevicePointer[tk.dt.int32], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = tid + 1

    @tk.jit
    def times_seven(out: tk.DevicePointer[tk.dt.int32], tid: tk.Uint[tk.ThreadIdx]):
        out[tid] = tid * 7

    result = {}
    for name in sys.argv[2].split(","):
        k = {"plus_one": plus_one, "times_seven": times_seven}[name]
        out = np.full(37, -5, np.int32)
        k[1, 37](out, target=sys.argv[1])
        ref = np.arange(37) + 1 if name == "plus_one" else np.arange(37) * 7
        result[name] = {"ok": bool(np.array_equal(out, ref)), "cache": k.compile_info.cache,
                        "key": k.compile_info.key}
    result["stats"] = disk_cache().stats
    print(json.dumps(result))
""")


def run(tmp_path, cache, target, names="plus_one,times_seven", env=None):
    script = tmp_path / "trust_kernels.py"
    script.write_text(SCRIPT)
    full = dict(os.environ, THORK_CACHE_DIR=str(cache), **(env or {}))
    r = subprocess.run([sys.executable, str(script), target, names], capture_output=True,
                       text=True, env=full, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def entry_file(cache, key):
    return cache / key[:2] / f"{key}.art"


def lib_of(cache, key):
    """The library file the entry ``key`` records (parsed from its metadata)."""
    blob = entry_file(cache, key).read_bytes()
    _, mlen, _, _ = _cache._HEADER.unpack_from(blob)
    meta = json.loads(blob[_cache._HEADER.size:_cache._HEADER.size + mlen])
    return cache / "lib" / f"{meta['lib']}.so"


@pytest.fixture
def cpu():
    from helpers import TARGETS

    if "cpu" not in TARGETS:
        pytest.skip("the CPU target is not installed here")
    return "cpu"


@pytest.fixture
def built(tmp_path, cpu):
    """A cache holding both kernels' entries; returns (cache folder, first run's result)."""
    cache = tmp_path / "cache"
    first, _ = run(tmp_path, cache, cpu)
    assert first["plus_one"]["ok"] and first["times_seven"]["ok"]
    assert first["plus_one"]["cache"] == "compiled"
    return cache, first


def test_folder_and_files_are_private_and_each_library_stored_once(built):
    cache, first = built
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for p in cache.rglob("*"):
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), (p, oct(mode))
    for name in ("plus_one", "times_seven"):
        lib = lib_of(cache, first[name]["key"]).read_bytes()
        copies = [p for p in cache.rglob("*") if p.is_file() and lib in p.read_bytes()]
        assert copies == [lib_of(cache, first[name]["key"])]  # one copy, in lib/
        assert entry_file(cache, first[name]["key"]).stat().st_size < 4096


def test_second_process_uses_verified_entries(tmp_path, built):
    cache, _ = built
    again, _ = run(tmp_path, cache, "cpu")
    assert again["plus_one"] == {**again["plus_one"], "ok": True, "cache": "disk"}
    assert again["stats"]["corrupt"] == 0


def test_planted_library_is_rejected_and_rebuilt(tmp_path, built):
    """Another kernel's valid library (same entry symbol) planted under this one's hash."""
    cache, first = built
    victim = lib_of(cache, first["plus_one"]["key"])
    victim.write_bytes(lib_of(cache, first["times_seven"]["key"]).read_bytes())
    again, _ = run(tmp_path, cache, "cpu", "plus_one")
    assert again["plus_one"]["ok"] and again["plus_one"]["cache"] == "compiled"
    assert again["stats"]["corrupt"] == 1


def test_forged_entry_is_rejected_and_rebuilt(tmp_path, built):
    """An entry pointing at another library, well formed, signed without the secret (the
    former format's plain checksum could be recomputed by anyone)."""
    cache, first = built
    key = first["plus_one"]["key"]
    other_lib = lib_of(cache, first["times_seven"]["key"]).stem
    art = Artifact(kind="hostlib", data=b"", entry="plus_one", compiler="x", arch="y")
    entry_file(cache, key).write_bytes(_cache._encode(art, key, os.urandom(32), other_lib))
    again, _ = run(tmp_path, cache, "cpu", "plus_one")
    assert again["plus_one"]["ok"] and again["plus_one"]["cache"] == "compiled"
    assert again["stats"]["corrupt"] == 1


def test_swapped_entries_of_two_kernels_are_rejected(tmp_path, built):
    """Every CPU library exports the same entry symbol: only the key check tells them apart."""
    cache, first = built
    a, b = entry_file(cache, first["plus_one"]["key"]), \
        entry_file(cache, first["times_seven"]["key"])
    blob_a, blob_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(blob_b)
    b.write_bytes(blob_a)
    again, _ = run(tmp_path, cache, "cpu")
    for name in ("plus_one", "times_seven"):
        assert again[name]["ok"] and again[name]["cache"] == "compiled", name
    assert again["stats"]["corrupt"] == 2


@pytest.mark.parametrize("fault", ["truncated entry", "truncated library", "garbage library",
                                   "missing library"])
def test_damaged_files_are_rebuilt_not_fatal(tmp_path, built, fault):
    cache, first = built
    key = first["plus_one"]["key"]
    path = lib_of(cache, key) if "library" in fault else entry_file(cache, key)
    if fault.startswith("truncated"):
        path.write_bytes(path.read_bytes()[:100])
    elif fault == "garbage library":
        path.write_bytes(os.urandom(path.stat().st_size))
    else:
        path.unlink()
    again, _ = run(tmp_path, cache, "cpu", "plus_one")
    assert again["plus_one"]["ok"] and again["plus_one"]["cache"] == "compiled"
    third, _ = run(tmp_path, cache, "cpu", "plus_one")
    assert third["plus_one"]["ok"] and third["plus_one"]["cache"] == "disk"


def _artifact(n=1000):
    return Artifact(kind="cubin", data=os.urandom(n), entry="k", compiler="c-1", arch="sm_90")


def _get_with_deadline(cache, key, seconds=20):
    """``cache.get(key)`` in a thread; fails the test instead of hanging on a FIFO."""
    out = []
    t = threading.Thread(target=lambda: out.append(cache.get(key)), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "reading the cache entry blocked"
    return out[0]


@pytest.mark.parametrize("kind", ["symlink to /dev/zero", "fifo", "sparse 1 TiB",
                                  "symlink to a valid entry", "group-writable"])
def test_non_regular_or_implausible_entries_are_refused(tmp_path, kind):
    c = DiskCache(tmp_path)
    key, other = "ab" * 32, "cd" * 32
    c.put(key, _artifact())
    c.put(other, _artifact())
    path = tmp_path / key[:2] / f"{key}.art"
    if kind != "group-writable":
        path.unlink()
    if kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse 1 TiB":
        with open(path, "wb") as f:
            f.truncate(1 << 40)
    elif kind == "symlink to a valid entry":
        path.symlink_to(tmp_path / other[:2] / f"{other}.art")
    else:
        path.chmod(0o620)
    assert _get_with_deadline(c, key) is None
    assert c.stats["corrupt"] == 1
    assert not os.path.lexists(path)  # removed, so the rebuild can write
    art = _artifact()
    c.put(key, art)
    assert c.get(key) == art


def test_cache_clear_removes_damaged_and_foreign_files(tmp_path):
    c = DiskCache(tmp_path)
    c.put("ab" * 32, _artifact())
    (tmp_path / "ab" / ("cd" * 32 + ".art")).write_bytes(b"junk")
    (tmp_path / "lib").mkdir(mode=0o700, exist_ok=True)
    (tmp_path / "lib" / "planted.so").write_bytes(b"\x7fELF junk")
    os.mkfifo(tmp_path / "ab" / "pipe")
    (tmp_path / "memo.json").write_text("{}")  # a file at the top goes too
    secret = (tmp_path / _cache._SECRET).read_bytes()
    assert c.clear() == 2  # the stored artifact and the damaged one
    left = [p for p in tmp_path.rglob("*") if not p.is_dir() and p.name != _cache._SECRET]
    assert left == []
    assert (tmp_path / _cache._SECRET).read_bytes() == secret  # the key stays
    assert [p.name for p in tmp_path.iterdir()] == [_cache._SECRET]


def _warned_fallback(cache_dir):
    _cache._reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        root = _cache.cache_root()
    msgs = [str(x.message) for x in w if issubclass(x.category, CacheWarning)]
    return root, msgs


@pytest.mark.parametrize("fault", ["owned by another user", "writable by other users",
                                   "cannot be created"])
def test_unsafe_folder_is_refused_for_a_private_one(tmp_path, monkeypatch, cpu, fault):
    folder = tmp_path / "shared-cache"
    if fault == "cannot be created":
        (tmp_path / "file").write_text("x")
        folder = tmp_path / "file" / "cache"  # under a regular file: ENOTDIR
    else:
        folder.mkdir()
        if fault == "owned by another user":
            if os.geteuid() != 0:
                pytest.skip("chown to another user needs root")
            os.chown(folder, 65534, 65534)
            folder.chmod(0o755)
        else:
            folder.chmod(0o777)
    monkeypatch.setenv("THORK_CACHE_DIR", str(folder))
    root = str(folder)
    try:
        root, msgs = _warned_fallback(folder)
        assert root != str(folder) and len(msgs) == 1 and fault in msgs[0]
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
        assert os.stat(root).st_uid == os.geteuid()
        # Kernels still build and run, through the private folder, with no second warning.
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")

            @tk.jit
            def plus_two(out: tk.DevicePointer[tk.dt.int32], tid: tk.Uint[tk.ThreadIdx]):
                out[tid] = tid + 2

            out = np.full(19, -1, np.int32)
            plus_two[1, 19](out, target=cpu)
        np.testing.assert_array_equal(out, np.arange(19) + 2)
        assert not [x for x in w if issubclass(x.category, CacheWarning)]
        assert disk_cache().entries() and str(disk_cache().root) == root
        if folder.exists():
            assert list(folder.iterdir()) == []  # nothing written into the unsafe folder
    finally:
        _cache._reset()
        if root != str(folder):
            __import__("shutil").rmtree(root, ignore_errors=True)


def test_read_only_folder_degrades_to_a_private_one(tmp_path, cpu):
    """A folder this user owns but cannot write: mode 0500, or for root (whom modes do not
    stop) the immutable attribute (``chattr +i``), as a read-only file system behaves."""
    import shutil

    folder = tmp_path / "ro-cache"
    folder.mkdir(mode=0o700)
    immutable = os.geteuid() == 0
    if immutable:
        if not shutil.which("chattr") or subprocess.run(
                ["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("running as root without chattr +i: no way to make a folder "
                        "read-only for this user")
    else:
        folder.chmod(0o500)
    try:
        result, err = run(tmp_path, folder, cpu, "plus_one")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert result["plus_one"]["ok"]
    warned = [ln for ln in err.splitlines() if "CacheWarning" in ln]
    assert len(warned) == 1 and "is not writable" in warned[0]
    assert list(folder.iterdir()) == []


def _read_only(folder, immutable: bool, on: bool) -> None:
    if immutable:
        subprocess.run(["chattr", "+i" if on else "-i", str(folder)], check=True)
    else:
        folder.chmod(0o500 if on else 0o700)


def test_folder_refusing_writes_it_claims_to_allow_degrades_at_the_first_write(
        tmp_path, monkeypatch, cpu):
    """A file system whose ``access(2)`` allows writes it then refuses: the folder check
    (no write probe: a process that only reads writes nothing) accepts it, the first
    write finds out, warns once, leaves nothing there and moves the process to a private
    folder, where the kernel compiles and runs; later writes go there, silently."""
    import shutil

    folder = tmp_path / "lying-cache"
    folder.mkdir(mode=0o700)
    immutable = os.geteuid() == 0
    if immutable and (not shutil.which("chattr") or subprocess.run(
            ["chattr", "+i", str(folder)], capture_output=True).returncode != 0):
        pytest.skip("running as root without chattr +i: no way to refuse root's writes")
    _read_only(folder, immutable, True)
    monkeypatch.setattr(os, "access", lambda *a, **k: True)  # the file system's claim
    monkeypatch.setenv("THORK_CACHE_DIR", str(folder))
    root = str(folder)
    try:
        root, msgs = _warned_fallback(folder)
        assert root == str(folder) and msgs == []  # reading needs no write
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")

            @tk.jit
            def plus_three(out: tk.DevicePointer[tk.dt.int32], tid: tk.Uint[tk.ThreadIdx]):
                out[tid] = tid + 3

            out = np.full(29, -1, np.int32)
            plus_three[1, 29](out, target=cpu)
            disk_cache().stats  # (the background writes are done)
        np.testing.assert_array_equal(out, np.arange(29) + 3)
        msgs = [str(x.message) for x in w if issubclass(x.category, CacheWarning)]
        assert len(msgs) == 1 and "is not writable" in msgs[0] and str(folder) in msgs[0]
        root = _cache.cache_root()
        assert root != str(folder)
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
        assert [e.key for e in disk_cache().entries()] == [plus_three.compile_info.key]
        assert list(folder.iterdir()) == []
    finally:
        _read_only(folder, immutable, False)
        _cache._reset()
        if root != str(folder):
            shutil.rmtree(root, ignore_errors=True)


def test_compiler_wrapper_change_is_a_different_key(tmp_path, monkeypatch, cpu):
    """Two CXX wrappers printing the same --version, one adding -ffast-math: the second
    must not be served the first one's library."""
    from thork_cpu._compiler import _find_cxx_in

    real = _find_cxx_in(None, os.environ.get("PATH", os.defpath))
    assert real
    wrappers = []
    for i, extra in enumerate(["", "-ffast-math"]):
        w = tmp_path / f"cxx{i}"
        w.write_text(f'#!/bin/sh\nexec {real} {extra} "$@"\n')
        w.chmod(0o755)
        wrappers.append(w)
    v = [subprocess.run([str(w), "--version"], capture_output=True, text=True).stdout
         for w in wrappers]
    assert v[0] == v[1]
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    infos = []
    for w in wrappers + wrappers[:1]:
        monkeypatch.setenv("CXX", str(w))

        @tk.jit
        def halve(out: tk.DevicePointer[tk.dt.float32], a: tk.DevicePointer[tk.dt.float32],
                  tid: tk.Uint[tk.ThreadIdx]):
            out[tid] = a[tid] / 2.0

        a = np.random.default_rng().standard_normal(23).astype(np.float32)
        out = np.full(23, np.nan, np.float32)
        halve[1, 23](out, a, target=cpu)
        np.testing.assert_array_equal(out, a / np.float32(2))
        infos.append(halve.compile_info)
    assert [i.cache for i in infos] == ["compiled", "compiled", "disk"]
    assert infos[0].key != infos[1].key and infos[0].key == infos[2].key
    assert infos[0].compiler != infos[1].compiler


def test_lru_eviction_keeps_the_cache_under_its_limit(tmp_path, monkeypatch):
    import time

    monkeypatch.setenv("THORK_CACHE_MAX_BYTES", str(6000))
    c = DiskCache(tmp_path)
    keys = [f"{i:02x}" * 32 for i in range(12)]
    for i, k in enumerate(keys):
        c.put(k, _artifact(900))
        time.sleep(0.02)  # distinct modification times (the LRU order)
        if i >= 1:
            assert c.get(keys[0]) is not None  # kept in use: never the one evicted
            time.sleep(0.02)
        assert c.size() <= 6000
    present = [k for k in keys if (tmp_path / k[:2] / f"{k}.art").exists()]
    assert keys[0] in present and keys[-1] in present
    assert len(present) < len(keys) and c.stats["evicted"] == len(keys) - len(present)
    # The oldest unused ones went first: what is left (apart from keys[0]) is a suffix.
    rest = [k for k in present if k != keys[0]]
    assert rest == keys[len(keys) - len(rest):]


def test_default_limit_is_two_gib(monkeypatch):
    monkeypatch.delenv("THORK_CACHE_MAX_BYTES", raising=False)
    assert _cache.max_bytes() == 2 << 30
    monkeypatch.setenv("THORK_CACHE_MAX_BYTES", "12345")
    assert _cache.max_bytes() == 12345


def test_concurrent_processes_compile_a_kernel_once(tmp_path, cpu):
    script = tmp_path / "trust_kernels.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, str(script), cpu, "plus_one"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1])["plus_one"])
    assert all(r["ok"] for r in results)
    assert sorted(r["cache"] for r in results) == ["compiled", "disk", "disk", "disk"]


def test_planted_native_module_is_rejected_and_rebuilt(tmp_path):
    """The native launch module goes through the same signed store: a library planted over
    it is noticed before loading, and the module rebuilt."""
    import shutil
    import sysconfig

    include = sysconfig.get_paths().get("include", "")
    if not (shutil.which("cc") and os.path.exists(os.path.join(include, "Python.h"))):
        pytest.skip("no C compiler or Python headers: the native module is not built here")
    probe = textwrap.dedent("""
        import json, hashlib
        from thork_core._native import native_status
        from thork_core import disk_cache
        s = native_status()
        path = s.split(maxsplit=1)[1]
        print(json.dumps({"status": s, "stats": disk_cache().stats,
                          "sha": hashlib.sha256(open(path, "rb").read()).hexdigest()}))
    """)
    script = tmp_path / "native_probe.py"
    script.write_text(probe)
    env = dict(os.environ, THORK_CACHE_DIR=str(tmp_path / "cache"))

    def go():
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = go()
    assert first["status"].startswith("ready ")
    lib = first["status"].split(maxsplit=1)[1]
    with open(lib, "r+b") as f:  # plant: same size, other bytes
        f.write(b"\x7fELF" + os.urandom(64))
    second = go()
    assert second["status"].startswith("ready ") and second["stats"]["corrupt"] == 1
    assert second["sha"] == first["sha"]  # the genuine module, rebuilt


def test_dropped_kernels_unmap_their_libraries(tmp_path, monkeypatch, cpu):
    """A kernel's host library stays mapped while the kernel lives and is unloaded after:
    making and dropping kernels does not grow the process's mappings."""
    import gc

    from helpers import LAUNCHED
    from thork_core._native import native_module

    native_module()  # loaded for good from the session's cache, not counted below
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "cache"))
    lib_dir = str(tmp_path / "cache" / "lib") + "/"

    def mapped() -> int:
        with open("/proc/self/maps") as f:
            return sum(lib_dir in line for line in f)

    if not os.path.exists("/proc/self/maps"):
        pytest.skip("no /proc/self/maps to count mappings")

    def make(c: int):
        @tk.jit
        def add_c(out: tk.DevicePointer[tk.dt.int32], tid: tk.Uint[tk.ThreadIdx]):
            out[tid] = tid + c

        return add_c

    counts = []
    for c in range(4):
        k = make(c)
        out = np.full(9, -1, np.int32)
        k[1, 9](out, target=cpu)
        np.testing.assert_array_equal(out, np.arange(9) + c)
        counts.append(mapped())
        # The suite records launched kernels (for the final cubin check): let go of it.
        for name in [n for n, v in LAUNCHED.items() if v is k or getattr(v, "fn", 0) is k.fn]:
            del LAUNCHED[name]
        del k
        gc.collect()
    assert counts[0] > 0 and len(set(counts)) == 1  # one kernel's worth at a time
    assert mapped() == 0


def test_a_checked_library_is_loaded_without_a_second_read(tmp_path, monkeypatch):
    """A hostlib the cache just compared with its entry is loaded from that file without
    reading and hashing it again (``library_file``); a file replaced since (other bytes,
    a new modification time) is compared again and rewritten, never loaded as it is."""
    monkeypatch.setenv("THORK_CACHE_DIR", str(tmp_path / "c"))
    _cache._reset()
    cache = disk_cache()
    data = b"\x7fELF" + os.urandom(300)
    cache.put("k" * 64, Artifact(kind="hostlib", data=data, entry="e", compiler="c",
                                 arch="a"))
    got = cache.get("k" * 64)
    assert got is not None and got.data == data and got.path
    read = _cache.read_private
    reads: list[str] = []
    monkeypatch.setattr(_cache, "read_private",
                        lambda path, limit: reads.append(path) or read(path, limit))
    assert _cache.library_file(got) == got.path and reads == []
    with open(got.path, "r+b") as f:  # replaced in place: same size, other bytes
        f.write(b"\x7fELF" + os.urandom(16))
    st = os.stat(got.path)
    os.utime(got.path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    path = _cache.library_file(got)
    assert reads and open(path, "rb").read() == data
    # Bytes from elsewhere (no cache path) go through library_path as before.
    fresh = Artifact(kind="hostlib", data=data, entry="e", compiler="c", arch="a")
    assert fresh.path == "" and open(_cache.library_file(fresh), "rb").read() == data


def test_eviction_counts_this_processes_writes_and_lists_again(tmp_path, monkeypatch):
    """Writes after the first add their size to the folder's total instead of listing it;
    the limit still holds, and another process's files are seen at the next listing."""
    monkeypatch.setenv("THORK_CACHE_MAX_BYTES", str(20000))
    _cache._reset()
    c = DiskCache(tmp_path)
    listings = []
    size = DiskCache.size
    monkeypatch.setattr(DiskCache, "size", lambda self: listings.append(1) or size(self))
    for i in range(5):
        c.put(f"{i:02x}" * 32, _artifact(900))
    assert len(listings) == 1  # the first write listed the folder, the others counted
    (tmp_path / "zz").mkdir()
    (tmp_path / "zz" / ("ee" * 32 + ".art")).write_bytes(b"x" * 18000)  # another process
    for i in range(5, 40):
        c.put(f"{i:02x}" * 32, _artifact(900))
        assert size(c) <= 20000 + 18000 + 1000 * 64  # bounded between listings
    assert size(c) <= 20000  # the estimate reached the limit: listed and evicted
    assert c.stats["evicted"] > 0
    _cache._reset()
