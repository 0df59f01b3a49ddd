"""``thork_core._digest``: SHA-256 and HMAC-SHA256 without OpenSSL for small inputs give
exactly what ``hashlib`` and ``hmac`` give (the disk cache's keys, library digests and
entry MACs depend on it), on both sides of the size where OpenSSL takes over."""

import hashlib
import hmac
import os
import random

import pytest
from helpers import run_python
from thork_core import _digest

SIZES = (0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, _digest.LARGE - 1, _digest.LARGE,
         _digest.LARGE + 17, 3 * _digest.LARGE + 5)


@pytest.mark.parametrize("size", SIZES)
def test_sha256_is_hashlibs(size):
    data = os.urandom(size)
    assert _digest.sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert _digest.sha256(data).digest() == hashlib.sha256(data).digest()
    # streamed in odd pieces, with and without a size hint
    cut = random.randrange(size + 1)
    for hint in (0, size - cut):
        h = _digest.sha256(data[:cut], hint)
        h.update(data[cut:])
        assert h.hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("key_size", (0, 1, 32, 63, 64, 65, 200))
@pytest.mark.parametrize("size", (0, 7, 64, 5000, _digest.LARGE + 3))
def test_hmac_sha256_is_hmacs(key_size, size):
    key, data = os.urandom(key_size), os.urandom(size)
    cuts = sorted(random.randrange(size + 1) for _ in range(3))
    parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, size])]
    want = hmac.new(key, data, hashlib.sha256).digest()
    got = _digest.hmac_sha256(key, parts)
    assert got == want, _mismatch(key, data, parts, got, want)
    assert _digest.hmac_sha256(key, tuple(parts)) == want
    assert _digest.compare_digest(want, bytes(want))
    other = bytes([want[0] ^ 1]) + want[1:]
    assert not _digest.compare_digest(want, other)


def _mismatch(key: bytes, data: bytes, parts: list[bytes], got: bytes, want: bytes) -> str:
    """What a mismatch leaves to go on (one was seen once in CI, session 20, and never
    again): the inputs, whether the parts still join to the data, whether the pad tables
    are intact, and both sides computed again."""
    return (f"key {key.hex()} data {data.hex()} parts {[p.hex() for p in parts]}: got "
            f"{got.hex()}, want {want.hex()}; parts join to data: "
            f"{b''.join(parts) == data}; pads intact: "
            f"{_digest._IPAD == bytes(x ^ 0x36 for x in range(256))} "
            f"{_digest._OPAD == bytes(x ^ 0x5C for x in range(256))}; again: "
            f"{_digest.hmac_sha256(key, [data]).hex()} against "
            f"{hmac.new(key, data, hashlib.sha256).hexdigest()}")


def test_small_inputs_leave_openssl_unloaded():
    code = ("import sys; from thork_core import _digest as d; "
            "d.hmac_sha256(b'k' * 100, [b'x' * 5000]); d.sha256_hex(b'y' * 60000); "
            "print('_hashlib' in sys.modules, 'hashlib' in sys.modules, "
            "d._small is not None)")
    loaded_ssl, loaded_hashlib, builtin = run_python(code, timeout=60).split()
    if builtin == "True":  # a Python with its own SHA-256 (all CPython builds we know)
        assert (loaded_ssl, loaded_hashlib) == ("False", "False")
