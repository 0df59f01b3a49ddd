"""Thork's on/off ``THORK_*`` variables, read one way.

Every boolean variable (``THORK_DEBUG``, ``THORK_NATIVE``, ``THORK_PLUGINS_AUTOLOAD``,
``THORK_SELECTION_RECORD``, ``THORK_TRACED_RECORD``, ``THORK_CLANG_FALLBACK``...) takes the
same spellings, case and surrounding spaces ignored: ``1``/``true``/``yes``/``on`` and
``0``/``false``/``no``/``off``; unset or empty means the variable's default. Any other
value is not guessed at: it warns (:class:`EnvironmentWarning`, once per variable and
value in a process, naming both and the accepted spellings) and the default holds.
``thork info`` checks the same spellings.
"""

from __future__ import annotations

import os
import threading
import warnings

__all__ = ["BOOL_VALUES", "EnvironmentWarning", "env_flag"]

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")
#: Every accepted spelling of an on/off variable (lower case).
BOOL_VALUES = ("1", "0", "true", "false", "yes", "no", "on", "off")

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


class EnvironmentWarning(UserWarning):
    """A ``THORK_*`` variable holds a value Thork does not accept; its default is used."""


def env_flag(name: str, default: bool) -> bool:
    """The on/off variable ``name`` (``default`` when unset, empty or not a spelling of on
    or off; the last warns once)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if not value:
        return default
    if value in _ON:
        return True
    if value in _OFF:
        return False
    with _lock:
        first = (name, raw) not in _warned
        _warned.add((name, raw))
    if first:
        warnings.warn(f"{name}={raw!r} is not one of {', '.join(BOOL_VALUES)}; using the "
                      f"default ({'on' if default else 'off'})", EnvironmentWarning,
                      stacklevel=2)
    return default
