"""The native ``Subscript``'s recent configurations and its direct mapping slot (session
12): ``kernel[grid, block]`` answered without the attribute and dict look-ups, with the
same answers as the memo dict and the Python fallback (``_native_launch.c``). No GPU:
the kernels here run on the CPU target or are not launched."""

from __future__ import annotations

import gc
import random
import threading
import weakref
from typing import Any

import numpy as np
import pytest
from helpers import TARGETS, run_threads


class Made:
    """What the fallback makes for a key: weakly referenceable, like a Launch."""

    def __init__(self, key: Any) -> None:
        self.key = key


class _Memo:
    """``obj[key]`` through a native Subscript over ``obj._memo``; the fallback records
    each key it is given and memoizes plain configurations, like thork's Kernel."""

    def __init__(self) -> None:
        self._memo: dict[Any, Made] = {}
        self.fell: list[Any] = []

    def _slow(self, key: Any) -> Made:
        self.fell.append(key)
        made = Made(key)
        if type(key) is tuple and 2 <= len(key) <= 3 and all(
                type(x) is int or (type(x) is tuple and all(type(y) is int for y in x))
                for x in key) and hasattr(self, "_memo"):
            self._memo[key] = made
        return made


@pytest.fixture
def cls(native: Any) -> type:
    class Memo(_Memo):
        pass

    native.Subscript("_memo", _Memo._slow).install(Memo)
    return Memo


def _sub(cls: type) -> Any:
    return cls.__dict__["__getitem__"]


def _dyn(*key: Any) -> tuple[Any, ...]:
    """A key tuple built at run time (not a code constant): ints made by arithmetic, so
    that large ones are new objects too."""
    return tuple(tuple(int(str(y)) for y in x) if isinstance(x, tuple) else int(str(x))
                 for x in key)


def test_a_plain_configuration_is_answered_from_the_recent_table(cls):
    m = cls()
    first = m[2, 128]
    assert m.fell == [(2, 128)] and m._memo == {(2, 128): first}
    for key in [(2, 128), _dyn(2, 128), (2, 128)]:
        assert m[key] is first
    assert m.fell == [(2, 128)] and _sub(cls).recent() == 1


@pytest.mark.parametrize("key", [
    (1000, 70000), (2**40, 3), (2**70, 5, 2**65), ((1000, 3, 1), (256, 2), 4096),
    ((7,), (128,)), (-5, 300),
])
def test_configurations_built_at_run_time_hit_by_value(cls, key):
    m = cls()
    first = m[key]
    again = _dyn(*key)
    assert again is not key and again == key
    assert m[again] is first and m.fell == [key]


@pytest.mark.parametrize("plain,other", [
    ((2, 128), ((2,), 128)),        # equal geometry, another shape: its own key
    ((2, 128), (2, (128,))),
    (((2, 1), 128), ((2, 1, 1), 128)),
    ((2, 128), (2, 128, 0)),
    ((2, 128), (2, 129)),
    ((2**70, 1), (2**70 + 1, 1)),
    ((1000, 1), (-1000, 1)),
])
def test_other_keys_are_not_answered_with_a_recent_value(cls, plain, other):
    m = cls()
    first = m[plain]
    got = m[_dyn(*other)]
    assert got is not first and got.key == other and len(m.fell) == 2


class _Int(int):
    pass


@pytest.mark.parametrize("key", [
    (2.0, 128), (True, 128), (2, 128.0), (2, True), (np.int64(2), 128), (_Int(2), 128),
    ((2.0,), 128), ((2,), (True,)), ((2, np.int32(1)), 128), [2, 128],
])
def test_equal_non_ints_never_get_the_recent_value(cls, key):
    m = cls()
    plain = m[2, 128], m[(2,), 128], m[(2, 1), 128], m[(2,), (1,)]
    got = m[key]
    assert all(got is not p for p in plain) and m.fell[-1] is key


def test_each_object_has_its_own_values(cls):
    a, b = cls(), cls()
    va, vb = a[2, 128], b[2, 128]
    assert va is not vb
    for _ in range(3):
        assert a[2, 128] is va and b[_dyn(2, 128)] is vb
    assert a.fell == [(2, 128)] and b.fell == [(2, 128)]


def test_more_configurations_than_entries_stay_right(cls):
    m = cls()
    keys = [(g, 32 * (g % 5 + 1)) for g in range(1, 40)]
    made = {k: m[k] for k in keys}
    order = keys * 4
    random.Random(7).shuffle(order)
    for k in order:
        assert m[_dyn(*k)] is made[k]
    assert len(m.fell) == len(keys)  # evicted ones come back from the dict


def test_the_table_keeps_nothing_alive(cls):
    m = cls()
    value = m[3, 64]
    assert m[3, 64] is value
    refs = weakref.ref(m), weakref.ref(value)
    del m, value
    gc.collect()
    assert refs[0]() is None and refs[1]() is None
    assert _sub(cls).recent() == 0
    fresh = cls()  # may reuse the address of the dead one: its own value
    got = fresh[3, 64]
    assert got.key == (3, 64) and fresh.fell == [(3, 64)]


def test_a_value_dropped_from_the_dict_is_not_answered_once_dead(cls):
    m = cls()
    m[4, 32]
    m._memo.clear()  # the only reference: the value dies, its entry with it
    gc.collect()
    assert m[4, 32].key == (4, 32) and len(m.fell) == 2


def test_values_without_weak_references_are_never_kept(native):
    class Plain:
        def __init__(self) -> None:
            self._memo = {(2, 128): ("launch", 1)}

    native.Subscript("_memo", lambda obj, key: ("fallback", key)).install(Plain)
    p = Plain()
    assert p[2, 128] == ("launch", 1)
    p._memo[2, 128] = ("launch", 2)  # not kept, so the dict answers
    assert p[2, 128] == ("launch", 2)
    assert Plain.__dict__["__getitem__"].recent() == 0


def test_without_a_dict_memo_every_subscript_falls_back(cls):
    m = cls()
    del m._memo
    assert m[2, 128].key == (2, 128) and m[2, 128].key == (2, 128)
    assert len(m.fell) == 2


def test_install_points_the_class_slot_and_later_assignments_win(native, cls):
    m = cls()
    assert type(cls.__dict__["__getitem__"]) is native.Subscript
    v = m[2, 128]
    assert m.__getitem__((2, 128)) is v and cls.__getitem__(m, (2, 128)) is v

    class Sub(cls):  # a subclass takes CPython's generic slot: same answers
        pass

    s = Sub()
    sv = s[2, 128]
    assert s[2, 128] is sv and s.fell == [(2, 128)]
    cls.__getitem__ = lambda self, key: ("python", key)  # CPython recomputes the slot
    assert m[2, 128] == ("python", (2, 128)) and s[2, 128] == ("python", (2, 128))


def test_a_class_installed_earlier_keeps_its_own_subscript(native):
    class A(_Memo):
        pass

    class B(_Memo):
        pass

    native.Subscript("_memo", _Memo._slow).install(A)
    native.Subscript("_memo", lambda obj, key: ("b", key)).install(B)  # installed last
    a, b = A(), B()
    assert a[2, 128] is a[2, 128] and a.fell == [(2, 128)]
    assert b[2, 128] == ("b", (2, 128))


def test_install_checks_its_argument(native):
    sub = native.Subscript("_memo", _Memo._slow)
    with pytest.raises(TypeError, match="cls must be a class defined in Python, got 42"):
        sub.install(42)
    with pytest.raises(TypeError, match="got <class 'int'>"):
        sub.install(int)
    bare = native.Subscript.__new__(native.Subscript)
    with pytest.raises(RuntimeError, match="not initialized"):
        bare.install(_Memo)


def test_forget_empties_the_table(cls):
    m = cls()
    v = m[2, 128]  # from the fallback (into the dict)
    sub = _sub(cls)
    assert sub.recent() == 0 and m[2, 128] is v and sub.recent() == 1  # from the dict
    sub.forget()
    assert sub.recent() == 0 and m[2, 128] is v and m.fell == [(2, 128)]  # the dict


def test_threads_with_their_own_configurations_get_their_own_values(cls):
    m = cls()
    wrong: list[tuple[int, Any]] = []
    keys = [(t + 1, 32 * (t + 1)) for t in range(8)] + [((300, 2), 1000, 48)]

    def work(t: int) -> None:
        key = keys[t]
        for i in range(3000):
            got = m[_dyn(*key)] if i % 2 else m[key]
            if got.key != key or m._memo[key] is not got:
                wrong.append((t, got.key))
                return

    run_threads(work, len(keys))
    assert wrong == [] and sorted(map(repr, m.fell)) == sorted(map(repr, keys))


@pytest.mark.skipif("cpu" not in TARGETS, reason="no CPU target")
def test_kernels_answer_from_the_table_and_keep_their_checks(native):
    import thork as tk
    from thork._kernel import Kernel
    from thork_core import ArgumentError

    @tk.jit(target="cpu")
    def k(out: tk.DevicePointer[tk.dt.float32], n: tk.dt.int32,
          bid: tk.Uint[tk.BlockIdx], tid: tk.Uint[tk.ThreadIdx],
          bdm: tk.Uint[tk.BlockDim]):
        i = bid * bdm + tid
        with tk.if_(i < n):
            out[i] = 2.0

    launch = k[3, 64]
    assert type(Kernel.__dict__["__getitem__"]) is native.Subscript
    g, b = int("3"), int("64")
    assert k[g, b] is launch and k[(3,), (64,)] is not launch
    assert k[(3,), (64,)].grid == launch.grid
    with pytest.raises(ArgumentError, match="grid must be an int"):
        k[3.0, 64]
    with pytest.raises(ArgumentError, match="block"):
        k[3, True]
    out = np.full(300, np.nan, np.float32)
    k[g, b](out, 300)
    np.testing.assert_array_equal(out[:192], 2.0)

    wrong: list[int] = []

    def work(t: int) -> None:
        own = np.full(37 * (t + 1), np.nan, np.float32)
        grid = (own.size + 31) // 32
        for _ in range(5):
            launch = k[int(str(grid)), 32]
            if launch.grid[0] != grid or launch is not k[grid, 32]:
                wrong.append(t)
                return
            own[:] = np.nan
            launch(own, own.size)
            if not np.array_equal(own, np.full_like(own, 2.0)):
                wrong.append(t)

    run_threads(work, 8)
    assert wrong == []


def test_a_kernel_lives_no_longer_for_its_subscripts(native):
    import thork as tk

    @tk.jit(target="cpu")
    def k(out: tk.DevicePointer[tk.dt.float32], bid: tk.Uint[tk.BlockIdx]):
        out[bid] = 1.0

    k[5, 1]
    k[5, 1]
    ref = weakref.ref(k)
    del k
    gc.collect()
    assert ref() is None


def test_the_table_is_consistent_under_a_racing_fill(cls):
    """Threads that fill and evict entries at once (more configurations than entries)
    while others read theirs: every answer is the dict's."""
    m = cls()
    stop = threading.Event()
    wrong: list[Any] = []

    def churn(t: int) -> None:
        i = 0
        while not stop.is_set() and i < 4000:
            key = (t * 1000 + i % 23 + 1, 32)
            got = m[_dyn(*key)]
            if got.key != key:
                wrong.append(got.key)
            i += 1

    run_threads(churn, 4)
    stop.set()
    assert wrong == []
