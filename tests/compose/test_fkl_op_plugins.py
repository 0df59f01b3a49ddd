"""fkl op plugins: an op's identity in every kernel key is module + qualified name + its
declared version (never the bare class name), and packages ship ops through the
``fkl.ops`` entry-point group, found as ``fkl.ops.<Name>`` / ``fkl.<Name>``."""

from __future__ import annotations

import sys
import types
import warnings

import fkl
import numpy as np
import pytest
from fkl._registry import reset_plugin_ops
from helpers import install_dist, poisoned, random_array, run_python

pytestmark = pytest.mark.plugin("compose")

H, W = 11, 17

# A third party's op module: ``Sqr`` computes x³ (same class name as fkl.Sqr, x²).
CUBE_SOURCE = """
import fkl

class Sqr(fkl.Op):
    elementwise = True
    version = {version}

    def apply(self, px, p, t):
        return [{expr} for v in px]
"""


def make_module(name: str, version: int = 1, expr: str = "v * v * v") -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(CUBE_SOURCE.format(version=version, expr=expr), f"<{name}>", "exec"),
             mod.__dict__)
    return mod


def run(target: str, op: fkl.Op, x: np.ndarray) -> np.ndarray:
    out = poisoned(x.shape, x.dtype)
    fkl.compose(fkl.TensorRead(), op, fkl.TensorWrite(), target=target)(x, out=out)
    return out


def test_two_same_named_ops_from_different_modules_give_their_own_results(target, rng):
    third = make_module("thirdparty_sqr_ops").Sqr
    assert third.__name__ == fkl.Sqr.__name__ == "Sqr"
    x = random_array(rng, (H, W, 3), np.float32)
    # Both orders in one process: neither may reuse the other's kernel.
    np.testing.assert_allclose(run(target, fkl.Sqr(), x), x * x, rtol=1e-6)
    np.testing.assert_allclose(run(target, third(), x), x * x * x, rtol=1e-5)
    np.testing.assert_allclose(run(target, fkl.Sqr(), x), x * x, rtol=1e-6)
    # Wrapped in a StaticLoop the wrapped op's identity counts too.
    np.testing.assert_allclose(run(target, fkl.StaticLoop(third(), 2), x), (x ** 3) ** 3,
                               rtol=1e-4)
    np.testing.assert_allclose(run(target, fkl.StaticLoop(fkl.Sqr(), 2), x), (x * x) ** 2,
                               rtol=1e-5)


def test_an_ops_declared_version_is_part_of_its_identity(target, rng):
    """An upgraded op (same module and name, new version, new code) gets a new kernel."""
    old = make_module("vendor_versioned_ops", version=1, expr="v + 1").Sqr
    new = make_module("vendor_versioned_ops", version=2, expr="v + 2").Sqr
    assert old.identity() != new.identity()
    assert old.identity() == "vendor_versioned_ops:Sqr@1"
    x = random_array(rng, (H, W), np.float32)
    np.testing.assert_allclose(run(target, old(), x), x + 1, rtol=1e-6)
    np.testing.assert_allclose(run(target, new(), x), x + 2, rtol=1e-6)


def test_kernel_keys_hold_qualified_identity_not_bare_name():
    third = make_module("thirdparty_key_ops").Sqr
    a = fkl.compose(fkl.TensorRead(), fkl.Sqr(), fkl.TensorWrite(), target="cpu")
    b = fkl.compose(fkl.TensorRead(), third(), fkl.TensorWrite(), target="cpu")
    ka, kb = a.chain.key(), b.chain.key()
    assert ka != kb
    assert "fkl._ops:Sqr@1" in repr(ka) and "thirdparty_key_ops:Sqr@1" in repr(kb)


# -- discovery through the fkl.ops entry-point group -----------------------------------------
PLUGIN_MODULE = """
import fkl

class Cube(fkl.Op):
    '''x**3, element-wise.'''
    elementwise = True
    def apply(self, px, p, t):
        return [v * v * v for v in px]

class Sqr(fkl.Op):
    '''Clashes with the built-in fkl.Sqr.'''
    elementwise = True
    def apply(self, px, p, t):
        return [v * v * v for v in px]

OPS = [Cube, Sqr]
NOT_AN_OP = [int]
"""


@pytest.fixture
def fake_plugin(tmp_path, monkeypatch):
    install_dist(tmp_path, "fake-fkl-ops", {
        "extra": "fake_fkl_ops_mod:OPS", "broken": "fake_fkl_ops_missing_module:OPS",
        "notop": "fake_fkl_ops_mod:NOT_AN_OP"}, {"fake_fkl_ops_mod": PLUGIN_MODULE},
        group="fkl.ops")
    monkeypatch.syspath_prepend(str(tmp_path))
    reset_plugin_ops()
    yield
    reset_plugin_ops()
    for name in ("Cube",):
        fkl.__dict__.pop(name, None)
    sys.modules.pop("fake_fkl_ops_mod", None)


def test_plugin_ops_are_found_and_clashes_and_failures_are_reported(fake_plugin, rng):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cube = fkl.ops.Cube
    messages = [str(w.message) for w in caught]
    assert cube.__module__ == "fake_fkl_ops_mod"
    assert fkl.Cube is cube
    # The clash names both the plugin's op and the built-in; the built-in keeps its name.
    assert any("fake_fkl_ops_mod.Sqr" in m and "fkl.Sqr" in m for m in messages), messages
    assert fkl.ops.Sqr is fkl.Sqr and fkl.Sqr.__module__ == "fkl._ops"
    # A broken entry point and one naming a non-op are skipped with a warning naming them.
    assert any("broken" in m and "failed to load" in m for m in messages), messages
    assert any("notop" in m and "expected an fkl.Op subclass" in m for m in messages)
    assert "Cube" in fkl.ops.available() and "Sqr" in fkl.ops.available()
    mine = {p.name: p for p in fkl.ops.installed() if p.distribution == "fake-fkl-ops"}
    assert mine["extra"].ops == ("fake_fkl_ops_mod.Cube", "fake_fkl_ops_mod.Sqr")
    assert mine["extra"].version == "0.1" and not mine["extra"].error
    assert "ModuleNotFoundError" in mine["broken"].error and not mine["broken"].ops
    assert mine["notop"].error
    with pytest.raises(AttributeError, match="no installed fkl op plugin"):
        fkl.ops.NoSuchOp
    x = random_array(rng, (H, W), np.float32)
    np.testing.assert_allclose(run("cpu", fkl.Cube(), x), x ** 3, rtol=1e-5)
    np.testing.assert_allclose(run("cpu", fkl.Sqr(), x), x * x, rtol=1e-6)


def test_two_plugins_with_one_name_warn_naming_both(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    install_dist(a, "aaa-ops", {"one": "aaa_ops_mod:Cube"}, {"aaa_ops_mod": PLUGIN_MODULE},
                 group="fkl.ops")
    install_dist(b, "bbb-ops", {"two": "bbb_ops_mod:Cube"}, {"bbb_ops_mod": PLUGIN_MODULE},
                 group="fkl.ops")
    monkeypatch.syspath_prepend(str(a))
    monkeypatch.syspath_prepend(str(b))
    reset_plugin_ops()
    try:
        with pytest.warns(UserWarning, match=r"bbb_ops_mod\.Cube.*aaa_ops_mod\.Cube"):
            cube = fkl.ops.Cube
        assert cube.__module__ == "aaa_ops_mod"  # the first distribution by name keeps it
    finally:
        reset_plugin_ops()
        fkl.__dict__.pop("Cube", None)
        for m in ("aaa_ops_mod", "bbb_ops_mod"):
            sys.modules.pop(m, None)


def test_import_fkl_does_not_scan_op_plugins():
    run_python("import sys, fkl; fkl.Sqr; fkl.compose;"
               "assert 'fkl._registry' not in sys.modules, 'scanned at import'")
