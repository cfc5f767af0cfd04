"""The region's key for UDP connect tokens, derived from the cluster secret.

Every node of a region holds the same cluster secret (``ARENA_CLUSTER_SECRET``), so a key
derived from it is the same on the primary and its standbys without a second secret to
distribute: a connect token the primary issued opens on the standby promoted after it. The
derivation (HKDF-SHA256, RFC 5869) binds the key to its purpose and the region's name, so
the key learns nothing about the secret that signs replication and session tokens, and
the tokens of one region are worthless at another's nodes.

Sans-I/O: bytes in, bytes out.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shared.datagram.constants import KEY_BYTES

__all__ = ["region_key"]

_PURPOSE = b"arena udp connect tokens v1"


def region_key(cluster_secret: bytes, region: str) -> bytes:
    """The key that seals and opens the region's connect tokens (32 bytes)."""
    if not cluster_secret:
        raise ValueError("a region key needs the cluster secret")
    kdf = HKDF(
        algorithm=hashes.SHA256(),
        length=KEY_BYTES,
        salt=_PURPOSE,
        info=b"region:" + region.encode(),
    )
    return kdf.derive(cluster_secret)
