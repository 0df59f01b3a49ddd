"""The ``thork`` command line as a function: :func:`main` (what the ``thork`` console
script and ``python -m thork`` run). Subcommands and their options: ``thork --help``."""

from __future__ import annotations

from ._cli import main

__all__ = ["main"]
