"""Kernel identity and the build cache of fkl pipes.

Two cache levels (SPEC §3.6): each pipe maps (pixel type, kernel form) to its built kernel,
and a process-wide table maps the full *type signature* (op types, pixel type, form,
target, compiler, arch) to the built executable, so a second pipe that differs only in
values (factors, rects, sizes, matrices...) reuses the first one's kernel.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thork_core import (
    CompileInfo,
    CudaRenderer,
    Executable,
    Target,
    build_kernel,
    choose,
    compile_artifact,
    instrument,
    parse_arch,
    plugins,
)

from ._flat import lower_flat
from ._lowering import Chain, Lowered, kernel_name, lower, type_chain
from ._pixel import PixType
from ._variant import Variants, one_tap, thread_shape

__all__ = ["Built", "Kernels", "build_cached", "checked", "reset_stats", "stats", "target_key"]


@dataclass
class Built:
    """A traced kernel, its loaded executable and how it was built."""

    lowered: Lowered
    exe: Executable
    info: CompileInfo


_BUILT: dict[tuple[Any, ...], Built] = {}
_LOCK = threading.Lock()
_STATS = {"builds": 0, "reuses": 0}


def stats() -> dict[str, int]:
    """Process-wide counters: ``builds`` (kernels traced and built — a compile or a
    disk-cache load) and ``reuses`` (a pipe found its kernel already built)."""
    return dict(_STATS)


def reset_stats(clear_cache: bool = False) -> None:
    """Zero the counters; ``clear_cache`` also forgets every built kernel."""
    _STATS.update(builds=0, reuses=0)
    if clear_cache:
        _BUILT.clear()


def build_cached(key: tuple[Any, ...], trace: Callable[[], Lowered], target: Target,
                 compiler: str | None, device: int = 0) -> Built:
    """The built kernel of type identity ``key`` (which must name the target, compiler and
    arch): from the process-wide table, or traced by ``trace()`` and built now, loaded on
    CUDA device ``device`` (each device has its own module and launcher). Every fkl
    kernel (pipes, divergent pipes, circular tensors) is built here."""
    if device:
        key = (*key, "cuda", device)
    with _LOCK:
        built = _BUILT.get(key)
        if built is None:
            lowered = trace()
            exe, info = build_kernel(lowered.ir, target, compiler, device)
            built = Built(lowered, exe, info)
            _BUILT[key] = built
            _STATS["builds"] += 1
        else:
            _STATS["reuses"] += 1
    return built


def checked(lowered: Lowered, debug: bool) -> Lowered:
    """Debug mode (h-mut hook): ``lowered`` with every array access bounds-checked
    (:func:`thork_core.instrument`) when ``debug``, else unchanged. The checked kernel has
    one hidden span parameter per pointer parameter, after them all:
    :func:`fkl._plan.add_spans` fills them. Every fkl kernel form (pipes, divergent pipes,
    circular tensors) is checked here."""
    return dataclasses.replace(lowered, ir=instrument(lowered.ir)) if debug else lowered


def target_key(target: Target | str | None, compiler: str | None) -> tuple[Target, tuple[
        Any, ...]]:
    """The resolved target and the tail every kernel identity ends with: (target name,
    compiler name, arch)."""
    tgt, comp = choose(target, compiler)
    return tgt, (tgt.name, comp.name, tgt.arch())


class Kernels:
    """The kernels of one pipe: its target (resolved on first need), each kernel's
    identity, trace and build."""

    def __init__(self, chain: Chain, variants: Variants, target: str | None,
                 compiler: str | None, debug: bool = False) -> None:
        self.chain = chain
        #: Debug mode: the kernels are bounds-checked (thork_core.instrument).
        self.debug = debug
        self.variants = variants
        self.target = target
        self.compiler = compiler
        self.resolved: Target | None = None
        self._built: dict[tuple[Any, ...], Built] = {}

    def resolve(self) -> Target:
        if self.resolved is None:
            self.resolved = choose(self.target, self.compiler)[0]
        return self.resolved

    def target_name(self) -> str:
        return self.resolve().name

    def language(self) -> str:
        """The language of this pipe's target ("cuda", "c++"). A target named at
        ``compose`` is looked up without checking that it is available, so kernels for a
        GPU can be lowered (and compiled to cubin) on a machine without one."""
        if self.resolved is None and self.target is not None:
            for t in plugins().targets():
                if t.name == self.target:
                    return t.language
        return self.resolve().language

    def signature(self, t: PixType, variant: str) -> tuple[Any, ...]:
        """The kernel identity for pixels ``t`` and a checked ``variant``: types only."""
        return (self.chain.key(), t, self.variants.form(t, variant),
                *target_key(self.resolve(), self.compiler)[1]) + (("debug",) if self.debug
                                                                   else ())

    def lowered(self, t: PixType, variant: str, target: str | None = None) -> Lowered:
        """The traced kernel (no compilation); ``target`` as in :class:`Variants`."""
        form = self.variants.form(t, variant, target)
        return self._lower(t, variant, kernel_name((self.chain.key(), t, form)), target)

    def _lower(self, t: PixType, variant: str, name: str,
               target: str | None = None) -> Lowered:
        type_chain(self.chain, t)
        if variant == "flat":
            spec = self.variants.flat_spec(t, target)
            assert spec is not None
            lowered = lower_flat(self.chain, t, name, spec)
        else:
            cuda = target != "cpu" if target is not None else self.language() == "cuda"
            form, cols, rows = thread_shape(variant)  # "grid:4x2": 4 x 2 per thread
            lowered = lower(self.chain, t, name, active=form == "active",
                            pitched=form in ("pitched", "pitched-both"),
                            pitched_out=form in ("pitched-out", "pitched-both"), cuda=cuda,
                            words=form != "scalar", columns=cols, rows=rows,
                            one_tap=one_tap(variant))
        return checked(lowered, self.debug)

    def get(self, t: PixType, variant: str, device: int = 0) -> Built:
        """The built kernel for ``t`` and ``variant`` on CUDA device ``device``: this
        pipe's, the process's, or a new build (traced, rendered, compiled or loaded from
        the disk cache)."""
        local: tuple[Any, ...] = (t, self.variants.form(t, variant))
        if device:
            local = (*local, device)
        built = self._built.get(local)
        if built is not None:
            return built
        key = self.signature(t, variant)
        tgt = self.resolve()
        if device:  # the kernel is compiled for that device's architecture
            key = (*key[:-1], tgt.arch_on(device))
        built = build_cached(key, lambda: self._lower(t, variant, kernel_name(key[:3])),
                             tgt, self.compiler, device)
        self._built[local] = built
        return built

    def source(self, t: PixType, variant: str | None, who: str) -> str:
        """The generated source for the pipe's target. A pipe composed with
        ``target="gpu"`` gives its CUDA source without needing a GPU."""
        if self.target == "gpu" and self.resolved is None:
            lowered = self.lowered(t, self.variants.check(t, variant, who, "gpu"), "gpu")
            return CudaRenderer().render(lowered.ir)
        lowered = self.lowered(t, self.variants.check(t, variant, who))
        return self.resolve().renderer().render(lowered.ir)

    def artifact(self, t: PixType, variant: str | None, who: str, arch: str,
                 compiler: str | None, kind: str) -> Any:
        """The CUDA kernel compiled for ``arch`` without loading it (no GPU needed)."""
        from thork_core.plugin import GpuTarget

        lowered = self.lowered(t, self.variants.check(t, variant, who, "gpu"), "gpu")
        comp = plugins().compiler(compiler or self.compiler, GpuTarget())
        source = CudaRenderer().render(lowered.ir)
        art, _, _ = compile_artifact(lowered.ir, source, comp, kind, parse_arch(arch))
        return art

    def compile_info(self, t: PixType | None) -> CompileInfo | None:
        """How the kernel for ``t`` (default: the most recent) was built."""
        if t is None:
            return next(reversed(self._built.values())).info if self._built else None
        v = self.variants
        for variant in (v.choose(t), "grid", "flat"):
            if variant == "flat" and not v.has_flat(t):
                continue
            built = self._built.get((t, v.form(t, variant)))
            if built is not None:
                return built.info
        return None
