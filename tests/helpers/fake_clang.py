"""A fake clang driver for the clang fallback tests: it answers ``--version`` as clang 99.0.0
and then fails the way clang fails against a too-new CUDA, or writes PTX no ptxas knows."""

from __future__ import annotations

import os
import stat
from typing import Any

__all__ = ["fake_clang"]

# What clang says when the installed CUDA is newer than it supports (clang's own wording).
_UNSUPPORTED = ("clang: error: GPU arch sm_80 is supported by CUDA versions between 7.0 and "
                "12.3 (inclusive), but installation at /usr/local/cuda is 13.0; use "
                "'--cuda-path' to specify a different CUDA install")


def fake_clang(folder: Any, mode: str) -> str:
    """A stand-in clang driver written into ``folder`` (its path is returned, for
    ``THORK_CLANG``): ``unsupported`` fails like clang against a too-new CUDA;
    ``newptx`` succeeds but writes PTX of an ISA no ptxas knows."""
    path = os.path.join(str(folder), f"fake-clang-{mode}")
    body = {
        "unsupported": f'echo "{_UNSUPPORTED}" >&2; exit 1',
        "newptx": 'out=""; while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; '
                  'shift; done; printf ".version 99.9\\n.target sm_80\\n.address_size 64\\n"'
                  ' > "$out"; exit 0',
    }[mode]
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                'if [ "$1" = "--version" ]; then echo "clang version 99.0.0"; exit 0; fi\n'
                f"{body}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path
