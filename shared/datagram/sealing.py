"""Authenticated encryption of every datagram, and of tokens.

* Channel packets: ChaCha20-Poly1305 (IETF, 96-bit nonce) from the ``cryptography`` package:
  ``bench/aead.py`` measured it faster than PyNaCl's on the hot path. The nonce is the
  packet's 64-bit sequence number; since there is one key per direction and per connection,
  and a sequence is never reused under a key, a nonce never repeats (netcode.io's rule).
  The packet's clear header is the associated data, so it cannot be altered either.
* Tokens and handshake packets: XChaCha20-Poly1305 (PyNaCl) with a random 192-bit nonce, for
  what has no counter to use (a token is sealed once by whoever issues it; a challenge is sent
  by a node that keeps no state for the address).
* :func:`derive_key`: keys of one connection from a session key and the connection's id, so
  a token used again at a standby after failover never reuses a nonce under the same key.
"""

from __future__ import annotations

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from nacl import bindings

from shared.datagram.constants import KEY_BYTES

__all__ = [
    "TAG_BYTES",
    "XNONCE_BYTES",
    "PacketKey",
    "derive_key",
    "random_bytes",
    "xopen",
    "xseal",
]

#: Poly1305's tag, appended to every sealed body.
TAG_BYTES = 16
#: XChaCha20's nonce, prefixed to what :func:`xseal` returns.
XNONCE_BYTES = bindings.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES

_NONCE_PAD = bytes(4)


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
        raise ValueError(f"a key is {KEY_BYTES} bytes")


class PacketKey:
    """One direction's key: seals and opens with the sequence number as the nonce."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        _check_key(key)
        self._aead = ChaCha20Poly1305(bytes(key))

    def seal(self, sequence: int, header: bytes, plaintext: bytes) -> bytes:
        """``header`` + ciphertext + tag: the datagram as sent (the header authenticated)."""
        return header + self.encrypt(sequence, plaintext, header)

    def open(self, sequence: int, header: bytes, sealed: bytes) -> bytes | None:
        """The plaintext, or ``None`` when the tag does not verify (forged, altered, wrong key)."""
        return self.decrypt(sequence, sealed, header)

    def encrypt(self, sequence: int, plaintext: bytes, associated: bytes) -> bytes:
        """Ciphertext + tag under nonce ``sequence``, ``associated`` authenticated, not sent."""
        return self._aead.encrypt(
            _NONCE_PAD + sequence.to_bytes(8, "little"), plaintext, associated
        )

    def decrypt(self, sequence: int, sealed: bytes, associated: bytes) -> bytes | None:
        """What :meth:`encrypt` gave, or ``None`` when it does not verify."""
        try:
            return self._aead.decrypt(
                _NONCE_PAD + sequence.to_bytes(8, "little"), sealed, associated
            )
        except InvalidTag:
            return None


def random_bytes(count: int) -> bytes:
    """Key material and nonces from the operating system's generator."""
    return os.urandom(count)


def xseal(key: bytes, plaintext: bytes, associated: bytes, *, nonce: bytes | None = None) -> bytes:
    """Random nonce + XChaCha20-Poly1305 ciphertext and tag. ``nonce`` fixes the nonce, for
    test vectors only: a random 192-bit one never repeats in practice, a fixed one would."""
    _check_key(key)
    if nonce is None:
        nonce = os.urandom(XNONCE_BYTES)
    elif len(nonce) != XNONCE_BYTES:
        raise ValueError(f"a nonce is {XNONCE_BYTES} bytes")
    return nonce + bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plaintext, associated, nonce, bytes(key)
    )


def xopen(key: bytes, sealed: bytes, associated: bytes) -> bytes | None:
    """What :func:`xseal` sealed, or ``None`` when it does not verify."""
    if len(sealed) < XNONCE_BYTES + TAG_BYTES:
        return None
    try:
        return bytes(
            bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
                sealed[XNONCE_BYTES:], associated, sealed[:XNONCE_BYTES], bytes(key)
            )
        )
    except Exception:  # nacl.exceptions.CryptoError: the tag did not verify
        return None


def derive_key(key: bytes, context: bytes, salt: bytes) -> bytes:
    """A 256-bit key for ``context`` (≤ 16 bytes) and ``salt`` from ``key`` (BLAKE2b keyed)."""
    _check_key(key)
    return hashlib.blake2b(salt, digest_size=KEY_BYTES, key=bytes(key), person=context).digest()
