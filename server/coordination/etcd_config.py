"""Where an etcd cluster is and how to reach it, as data (sans-I/O).

One grammar for every Arena process that talks to etcd (the node's ``--coordinator``, the
directory's ``--registry``): ``etcd://HOST:PORT[,HOST:PORT...]`` over plain HTTP, or
``etcds://...`` over TLS. Several members are listed so that a client can move to the next
one when the member it talks to is down: etcd serves the same data from any member.

:class:`EtcdAccess` is the rest of what a client needs: the TLS files (a CA to verify the
members, a certificate and key when they ask for client certificates) and a user with its
password for etcd's own authentication. Files and environment variables are read at the
command line's edge (:mod:`server.coordination.net.etcd_options`); this module only checks
that what was given fits together.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["DEFAULT_LEASE_TTL", "ETCD_USAGE", "EtcdAccess", "EtcdCluster", "parse_etcd_address"]

#: Seconds a leader's lease outlives its last keep-alive unless told otherwise: etcd's
#: smallest with its default raft timings.
DEFAULT_LEASE_TTL = 2
ETCD_USAGE = "expected etcd://HOST:PORT[,HOST:PORT...] (etcds:// for TLS)"
_SCHEMES = {"etcd": "http", "etcds": "https"}


@dataclass(frozen=True, slots=True)
class EtcdAccess:
    """How to authenticate to etcd: TLS files (paths) and a user with its password.

    ``ca``, ``cert`` or ``key`` switch every member to ``https://`` (a CA says the members
    speak TLS); ``user`` asks etcd for a token (``/v3/auth/authenticate``) sent with every
    request. The password is left out of ``repr`` so that it never reaches a log line.
    """

    ca: str = ""
    cert: str = ""
    key: str = ""
    user: str = ""
    password: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if bool(self.cert) != bool(self.key):
            raise ValueError("--etcd-cert and --etcd-key go together: give both or neither")
        if self.password and not self.user:
            raise ValueError("an etcd password without --etcd-user: name the user too")
        if self.user and not self.password:
            raise ValueError(
                f"--etcd-user {self.user!r} has no password: set it in the variable named by "
                "--etcd-password-env or in --etcd-password-file"
            )

    @property
    def tls(self) -> bool:
        """Whether TLS files were given (the members then speak https)."""
        return bool(self.ca or self.cert)


@dataclass(frozen=True, slots=True)
class EtcdCluster:
    """An etcd cluster's members (base URLs, tried in this order) and how to reach them."""

    endpoints: tuple[str, ...]
    access: EtcdAccess = field(default_factory=EtcdAccess)

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("an etcd cluster needs at least one member")

    @classmethod
    def from_address(cls, address: str, access: EtcdAccess | None = None) -> EtcdCluster:
        """:func:`parse_etcd_address` with ``access``'s TLS (files given: https)."""
        access = access or EtcdAccess()
        return cls(parse_etcd_address(address, tls=access.tls), access)


def _member(spec: str, member: str, scheme: str) -> str:
    if not member or any(c in member for c in "/?#@ "):
        raise ValueError(f"bad etcd address {spec!r}: {ETCD_USAGE}, nothing else")
    parts = urlsplit(f"{scheme}://{member}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(
            f"bad port in etcd address {spec!r}: expected an integer from 1 to 65535"
        ) from None
    host = parts.hostname
    if not host:
        raise ValueError(f"missing host in etcd address {spec!r}: {ETCD_USAGE}")
    if port is None:
        raise ValueError(f"missing port in etcd address {spec!r}: {ETCD_USAGE}")
    if not 1 <= port <= 65535:
        raise ValueError(f"bad port in etcd address {spec!r}: expected an integer from 1 to 65535")
    try:
        shown = f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        shown = host
    return f"{scheme}://{shown}:{port}"


def parse_etcd_address(spec: str, *, tls: bool = False) -> tuple[str, ...]:
    """The members' base URLs in ``etcd://H1:P1,H2:P2`` (``https://`` for ``etcds://`` or
    when ``tls``); :class:`ValueError` with one line naming the problem."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty etcd address: {ETCD_USAGE}")
    prefix, sep, rest = spec.partition("://")
    if not sep or prefix not in _SCHEMES:
        raise ValueError(f"bad etcd address {spec!r}: {ETCD_USAGE}")
    if not rest:
        raise ValueError(f"bad etcd address {spec!r}: {ETCD_USAGE}, nothing else")
    scheme = "https" if tls else _SCHEMES[prefix]
    members = tuple(_member(spec, member, scheme) for member in rest.split(","))
    if len(set(members)) != len(members):
        raise ValueError(f"bad etcd address {spec!r}: a member is listed twice")
    return members
