"""SHA-256 and HMAC-SHA256 without loading OpenSSL for small inputs.

``import hashlib`` loads OpenSSL's ``_hashlib`` (and ``_blake2``) and asks it for every
algorithm it lists: ~3 ms of a fresh process on the H200's host (session 11's
``import_time``), for the cache keys, memo fingerprints and entry MACs of a first launch,
which hash a few KB. CPython's own SHA-256 (``_sha2``, ``_sha256`` before 3.12) is a
module of its own and costs nothing to load; it is slower per byte than OpenSSL's (which
uses the CPU's SHA instructions), so inputs of :data:`LARGE` bytes or more go to
``hashlib`` (loaded then). Both compute the same function: the digests are identical
(tests/core/test_digest.py checks them against ``hashlib`` and ``hmac``).
"""

from __future__ import annotations

from _operator import _compare_digest as compare_digest  # what hmac.compare_digest is
from typing import Any, Protocol

__all__ = ["LARGE", "compare_digest", "hmac_sha256", "sha256", "sha256_hex"]


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


#: Inputs this large (bytes) are hashed by OpenSSL (``hashlib``): from about there its
#: speed repays loading it (~3 ms against the built-in's ~250+ MB/s). Below it are the
#: keys, MACs and the libraries a first launch checks (the native launch module's is
#: ~85 KB: with 64 KiB here the first call loaded OpenSSL, +1.3 ms in session 12's run 9).
LARGE = 1 << 20

try:  # CPython's built-in SHA-256: a module of its own (3.12: _sha2; before: _sha256)
    from _sha2 import sha256 as _small  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the Python version
    try:
        from _sha256 import sha256 as _small  # type: ignore[import-not-found,no-redef]
    except ImportError:  # a Python built without it: OpenSSL's for everything
        _small = None

_BLOCK = 64  # SHA-256's block size (bytes), HMAC's key block
#: Translation tables: a key's bytes XOR HMAC's outer and inner pads.
_OPAD = bytes(x ^ 0x5C for x in range(256))
_IPAD = bytes(x ^ 0x36 for x in range(256))


def sha256(data: bytes = b"", size_hint: int = 0) -> _Hash:
    """A SHA-256 object (``update``, ``digest``, ``hexdigest``) over ``data``: CPython's
    built-in one unless ``data`` or ``size_hint`` (the bytes still to come) reaches
    :data:`LARGE`."""
    if _small is None or len(data) + size_hint >= LARGE:
        import hashlib

        return hashlib.sha256(data)
    h: Any = _small(data)
    return h  # type: ignore[no-any-return]


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 of ``data``."""
    return sha256(data).hexdigest()


def hmac_sha256(key: bytes, parts: tuple[bytes, ...] | list[bytes]) -> bytes:
    """HMAC-SHA256 (RFC 2104) of the concatenated ``parts`` under ``key``: what
    ``hmac.new(key, b"".join(parts), hashlib.sha256).digest()`` returns."""
    size = sum(len(p) for p in parts)
    if len(key) > _BLOCK:
        key = sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = sha256(key.translate(_IPAD), size)
    for p in parts:
        inner.update(p)
    outer = sha256(key.translate(_OPAD))
    outer.update(inner.digest())
    return outer.digest()
