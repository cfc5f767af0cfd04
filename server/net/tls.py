"""TLS for a node: its listener's certificate, and whom its own connections trust.

``--tls-cert``/``--tls-key`` make the node listen with TLS (``https://``, ``wss://``): the
same port serves players, standbys and operators. ``--tls-ca`` is what the node's own
connections to its peers (a standby's link to its primary, the peers' ``/health``) trust
besides the system's CAs: a region's private CA, or a self-signed certificate.
"""

from __future__ import annotations

import ssl

__all__ = ["client_context", "server_context"]


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """The listener's context; ValueError (one line) when the files do not make one."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except FileNotFoundError as missing:
        raise ValueError(f"--tls-cert/--tls-key: no such file: {missing.filename}") from None
    except (OSError, ssl.SSLError) as error:
        raise ValueError(
            f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate and its key "
            f"({getattr(error, 'reason', None) or error})"
        ) from None
    return context


def client_context(ca: str) -> ssl.SSLContext | bool:
    """What the node's outgoing connections verify servers with: the system's CAs (True,
    aiohttp's default) and, with ``ca`` (a PEM file), that too."""
    if not ca:
        return True
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=ca)
    except FileNotFoundError:
        raise ValueError(f"--tls-ca {ca}: no such file") from None
    except (OSError, ssl.SSLError) as error:
        raise ValueError(
            f"--tls-ca {ca}: not a PEM certificate ({getattr(error, 'reason', None) or error})"
        ) from None
    return context
