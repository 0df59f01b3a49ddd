"""Ahead-of-time bundles (``thork precompile``, ``THORK_CACHE_BUNDLE``): a fresh cache plus
the bundle compiles nothing and computes what NumPy does; every tampering (a changed byte,
swapped entries, a bad manifest, a folder or file others can write, a symlink) is refused
with BundleError naming the bundle and the check; a key the bundle lacks builds as usual.
Across Dask workers: tests/compose/test_dask_frames.py."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import poisoned
from thork_core import BundleError
from thork_core.build import build_stats
from thork_core.cli import main

pytestmark = pytest.mark.plugin("cpu")

MODULE = '''
import numpy as np
import thork as tk

C = {c}

@tk.jit
def offset(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
           n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
           bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * 3.0 + {c}

@tk.jit
def square(out: tk.DevicePointer[tk.dt.float32], x: tk.DevicePointer[tk.dt.float32],
           n: tk.dt.int32, bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
           bdm: tk.Uint[tk.BlockDim]):
    i = bid * bdm + tid
    with tk.if_(i < n):
        out[i] = x[i] * x[i] - {c}

ITEMS = [offset, square]
'''


def _module(folder: Path, c: float) -> Any:
    """A fresh importable module with two kernels whose source is unique to ``c``."""
    name = f"bundled_{uuid.uuid4().hex[:12]}"
    (folder / f"{name}.py").write_text(textwrap.dedent(MODULE.format(c=repr(c))))
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return importlib.import_module(name)


def _fresh_cache(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    from thork_core import _cache

    monkeypatch.setenv("THORK_CACHE_DIR", str(folder))
    _cache._reset()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A CPU-target bundle of a generated module's two kernels (made once), and the
    module (its kernels never launched in this process before the tests copy it)."""
    root = tmp_path_factory.mktemp("bundle-src")
    mod = _module(root, float(np.float32(np.random.default_rng().uniform(0.1, 0.9))))
    out = root / "bundle"
    old = os.environ.get("THORK_CACHE_DIR")
    os.environ["THORK_CACHE_DIR"] = str(root / "cache")
    try:
        from thork_core import _cache

        _cache._reset()
        assert main(["precompile", f"{mod.__name__}:ITEMS", "--target", "cpu", "-o",
                     str(out)]) == 0
    finally:
        if old is None:
            os.environ.pop("THORK_CACHE_DIR", None)
        else:
            os.environ["THORK_CACHE_DIR"] = old
        _cache._reset()
    return out, mod


def _copy(bundle: Path, dst: Path) -> Path:
    shutil.copytree(bundle, dst)
    return dst


def _keys(folder: Path) -> list[str]:
    return list(json.loads((folder / "manifest.json").read_text())["entries"])


def test_precompile_writes_a_manifest_of_hashes(bundle):
    folder, _ = bundle
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == "thork-bundle" and manifest["version"] == 1
    assert len(manifest["entries"]) == 2
    import hashlib

    for key, rec in manifest["entries"].items():
        data = (folder / "entries" / f"{key}.art").read_bytes()
        assert hashlib.sha256(data).hexdigest() == rec["sha256"]
        assert rec["kind"] == "hostlib" and rec["entry"] in ("offset", "square")
    for f in (folder, folder / "entries", folder / "manifest.json"):
        assert not f.stat().st_mode & 0o022  # nobody else may change what is loaded


def test_fresh_cache_plus_bundle_compiles_nothing(bundle, tmp_path, monkeypatch, rng):
    folder, mod = bundle
    _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("THORK_CACHE_BUNDLE", str(folder))
    before = build_stats()
    n = 517
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    mod.offset[(n + 127) // 128, 128](out, x, n, target="cpu")
    sq = poisoned(n, np.float32)
    mod.square[(n + 127) // 128, 128](sq, x, n, target="cpu")
    after = build_stats()
    assert after["compiles"] == before["compiles"], "a kernel was compiled despite the bundle"
    assert after["bundle"] == before["bundle"] + 2
    assert mod.offset.compile_info.cache == "bundle"
    k = mod.C
    np.testing.assert_allclose(out, x * np.float32(3) + np.float32(k), rtol=1e-6)
    np.testing.assert_allclose(sq, x * x - np.float32(k), rtol=1e-5, atol=1e-6)


def test_a_key_the_bundle_lacks_builds_as_usual(bundle, tmp_path, monkeypatch, rng):
    folder, _ = bundle
    _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("THORK_CACHE_BUNDLE", str(folder))
    other = _module(tmp_path, 0.125)  # different source: not in the bundle
    before = build_stats()
    n = 65
    x = rng.standard_normal(n).astype(np.float32)
    out = poisoned(n, np.float32)
    other.offset[1, 128](out, x, n, target="cpu")
    np.testing.assert_allclose(out, x * np.float32(3) + np.float32(0.125), rtol=1e-6)
    assert build_stats()["compiles"] == before["compiles"] + 1
    assert other.offset.compile_info.cache == "compiled"


def _tampered(bundle: tuple[Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
              ) -> tuple[Path, Any]:
    folder, mod = bundle
    copy = _copy(folder, tmp_path / "bundle")
    _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("THORK_CACHE_BUNDLE", str(copy))
    return copy, mod


def _use(mod: Any) -> None:
    """Look both kernels up as a CPU-target build does (no launch needed)."""
    mod.offset.precompile(target="cpu")
    mod.square.precompile(target="cpu")


def test_a_changed_byte_is_refused(bundle, tmp_path, monkeypatch):
    folder, mod = _tampered(bundle, tmp_path, monkeypatch)
    entry = folder / "entries" / f"{_keys(folder)[0]}.art"
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x01
    entry.write_bytes(bytes(data))
    before = build_stats()
    with pytest.raises(BundleError, match=r"does not match the manifest's SHA-256"):
        _use(mod)
    assert build_stats()["compiles"] == before["compiles"]  # refused, not recompiled


def test_swapped_entries_are_refused(bundle, tmp_path, monkeypatch):
    folder, mod = _tampered(bundle, tmp_path, monkeypatch)
    a, b = (folder / "entries" / f"{k}.art" for k in _keys(folder))
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    with pytest.raises(BundleError, match=r"does not match the manifest's SHA-256"):
        _use(mod)


def test_swapped_entries_and_manifest_lines_are_refused(bundle, tmp_path, monkeypatch):
    folder, mod = _tampered(bundle, tmp_path, monkeypatch)
    ka, kb = _keys(folder)
    a, b = folder / "entries" / f"{ka}.art", folder / "entries" / f"{kb}.art"
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    manifest = json.loads((folder / "manifest.json").read_text())
    e = manifest["entries"]
    e[ka], e[kb] = e[kb], e[ka]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"holds the entry of key .* \(entries swapped\)"):
        _use(mod)


@pytest.mark.parametrize("manifest", ["{not json", '{"format": "zip", "entries": {}}',
                                      '{"format": "thork-bundle", "version": 9, '
                                      '"entries": {}}', "[]"])
def test_a_bad_manifest_is_refused(bundle, tmp_path, monkeypatch, manifest):
    folder, mod = _tampered(bundle, tmp_path, monkeypatch)
    (folder / "manifest.json").write_text(manifest)
    with pytest.raises(BundleError, match=r"manifest|not valid JSON"):
        _use(mod)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("where", [".", "entries", "manifest.json", "entry"])
def test_files_others_can_write_are_refused(bundle, tmp_path, monkeypatch, where):
    folder, mod = _tampered(bundle, tmp_path, monkeypatch)
    path = folder / "entries" / f"{_keys(folder)[0]}.art" if where == "entry" \
        else folder / where
    os.chmod(path, path.stat().st_mode | 0o002)  # world-writable
    with pytest.raises(BundleError, match=r"writable by group or others"):
        _use(mod)
    os.chmod(path, (path.stat().st_mode & ~0o002) | 0o020)  # group-writable
    with pytest.raises(BundleError, match=r"writable by group or others"):
        _use(mod)


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_a_symlinked_entry_or_missing_bundle_is_refused(bundle, tmp_path, monkeypatch):
    folder, mod = _tampered(bundle, tmp_path, monkeypatch)
    entry = folder / "entries" / f"{_keys(folder)[0]}.art"
    real = tmp_path / "elsewhere.art"
    shutil.move(entry, real)
    entry.symlink_to(real)
    with pytest.raises(BundleError, match=r"cannot be read|not a regular file"):
        _use(mod)
    monkeypatch.setenv("THORK_CACHE_BUNDLE", str(tmp_path / "no-such-bundle"))
    with pytest.raises(BundleError, match=r"cannot be read"):
        _use(mod)


def test_precompile_reports_bad_specs(tmp_path, capsys):
    assert main(["precompile", "no_such_module_xyz:k", "-o", str(tmp_path / "b")]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err
    assert main(["precompile", "os:sep", "-o", str(tmp_path / "b")]) == 2
    assert "expected a thork kernel" in capsys.readouterr().err
    assert main(["precompile", "nocolon", "-o", str(tmp_path / "b")]) == 2
    assert "is not module:attr" in capsys.readouterr().err
