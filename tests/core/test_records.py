"""Core's small records are plain classes (``thork_core._record``: no dataclass created
when their modules load, on the path of a fresh process's first kernel); each behaves as
the dataclass it was. The references are those dataclasses, declared here."""

import copy
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
from thork_core import ArrayView, Artifact, CompileInfo, Frontend, PluginInfo, dt
from thork_core._cache import CacheEntry
from thork_core._debug import Site
from thork_core._ir import Loc


@dataclasses.dataclass(frozen=True)
class RefArtifact:
    kind: str
    data: bytes
    entry: str
    compiler: str
    arch: str
    log: str = ""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    path: str = dataclasses.field(default="", compare=False, repr=False)


@dataclasses.dataclass
class RefArrayView:
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: Any
    device: str
    device_id: int = 0
    readonly: bool = False
    host: Any = None
    stream: int | None = None
    keepalive: Any = None


@dataclasses.dataclass
class RefCompileInfo:
    target: str
    compiler: str
    arch: str
    kind: str
    flags: list[str]
    cache: str
    key: str
    compile_ms: float
    load_ms: float
    log: str = ""
    fallback: str = ""
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    device: int = 0


@dataclasses.dataclass
class RefPluginInfo:
    name: str
    distribution: str
    version: str
    registered: dict[str, list[str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RefFrontend:
    name: str
    module: str
    description: str
    extensions: Any = None


@dataclasses.dataclass(frozen=True)
class RefCacheEntry:
    key: str
    path: Path
    size: int
    entry: str
    compiler: str
    kind: str
    arch: str
    last_used: float = 0.0


@dataclasses.dataclass(frozen=True)
class RefSite:
    kernel: str
    array: str
    space: str
    param_index: int | None
    access: str
    loc: Any
    width: int = 1
    function: str | None = None


LOC = Loc("k.py", 12)
CASES = [  # (class, reference, frozen, positional arguments, one changed argument)
    (Artifact, RefArtifact, True, ("cubin", b"\x7fELF", "k", "nvrtc 13.0", "sm_90"), 4),
    (Artifact, RefArtifact, True, ("hostlib", b"", "k", "cc", "x86_64", "log", {"r": 3},
                                   "/tmp/x.so"), 5),
    (ArrayView, RefArrayView, False, (4096, (3, 5), None, dt.float32, "cpu"), 0),
    (ArrayView, RefArrayView, False, (8192, (7,), (8,), dt.int64, "cuda", 1, True, None, 5,
                                      [1]), 8),
    (CompileInfo, RefCompileInfo, False, ("gpu", "nvrtc", "sm_90", "cubin", ["-O3"], "disk",
                                          "ab12", 0.5, 1.25), 6),
    (CompileInfo, RefCompileInfo, False, ("cpu", "cc", "x86_64", "hostlib", [], "compiled",
                                          "cd", 3.0, 0.1, "w", "fb", {"registers": 40}, 1),
     11),
    (PluginInfo, RefPluginInfo, False, ("cpu", "thork-cpu", "0.1.0"), 2),
    (PluginInfo, RefPluginInfo, False, ("x", "d", "1", {"targets": ["cpu"]}), 3),
    (Frontend, RefFrontend, True, ("trace", "thork", "a DSL"), 2),
    (Frontend, RefFrontend, True, ("compose", "fkl", "ops", list), 3),
    (CacheEntry, RefCacheEntry, True, ("ab", Path("/c/ab.art"), 10, "k", "nvrtc", "cubin",
                                       "sm_90"), 2),
    (CacheEntry, RefCacheEntry, True, ("ab", Path("/c/ab.art"), 10, "k", "nvrtc", "cubin",
                                       "sm_90", 17.5), 7),
    (Site, RefSite, True, ("k", "a", "parameter", 0, "load", LOC), 4),
    (Site, RefSite, True, ("k", "s", "shared", None, "store", None, 4, "helper"), 7),
]


def changed(args: tuple[Any, ...], i: int) -> tuple[Any, ...]:
    v = args[i]
    new = (v + 1 if isinstance(v, (int, float)) and not isinstance(v, bool) else
           (not v) if isinstance(v, bool) else v + b"!" if isinstance(v, bytes) else
           v + "!" if isinstance(v, str) else {**v, "z": 1} if isinstance(v, dict) else
           [*v, 9] if isinstance(v, list) else Path(str(v) + "x") if isinstance(v, Path)
           else tuple if v is list else None)
    return (*args[:i], new, *args[i + 1:])


@pytest.mark.parametrize("cls, ref, frozen, args, k", CASES,
                         ids=lambda v: getattr(v, "__name__", None))
def test_record_behaves_as_its_dataclass(cls, ref, frozen, args, k):
    a, r = cls(*args), ref(*args)
    assert repr(a) == repr(r).replace(ref.__qualname__, cls.__qualname__)
    names = [f.name for f in dataclasses.fields(ref)]
    assert [getattr(a, n) for n in names] == [getattr(r, n) for n in names]
    assert cls.__match_args__ == ref.__match_args__
    assert cls(**dict(zip(names, args))) == a == cls(*args)  # by keyword, by position
    assert a != r and (a == r) is False  # another class: never equal
    b, rb = cls(*changed(args, k)), ref(*changed(args, k))
    assert (a == b) == (r == rb) and (a != b) == (r != rb)
    if frozen:
        try:
            want = hash(r)
        except TypeError:  # a dict among the compared fields, as the dataclass
            with pytest.raises(TypeError):
                hash(a)
        else:
            assert hash(a) == want
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.__setattr__(names[0], args[0])
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.__delattr__(names[-1])
    else:
        with pytest.raises(TypeError):
            hash(a)
        setattr(a, names[0], changed(args, 0)[0])
        assert getattr(a, names[0]) == changed(args, 0)[0] and a != cls(*args)
        setattr(a, names[0], args[0])
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    assert copy.copy(a) == a


def test_container_defaults_are_fresh_per_record():
    for make in (lambda: Artifact("ptx", b"", "k", "c", "sm_90").info,
                 lambda: CompileInfo("gpu", "c", "a", "cubin", [], "disk", "k", 0, 0).attributes,
                 lambda: PluginInfo("p", "d", "1").registered):
        first = make()
        first["x"] = 1
        assert make() == {} and make() is not make()


def test_artifact_equality_ignores_the_library_path():
    a = Artifact("hostlib", b"so", "k", "cc", "x86_64", path="/a.so")
    b = Artifact("hostlib", b"so", "k", "cc", "x86_64", path="/b.so")
    assert a == b and a.path == "/a.so" and "path" not in repr(a)
