"""The ``--etcd-*`` command-line options, shared by ``arena-server`` and ``arena-directory``.

Both talk to the same etcd cluster the same way, so they take the same flags: TLS files,
and a user whose password comes from an environment variable or a file (never from the
command line, where any local user can read it in the process list).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping

from server.coordination.etcd_config import EtcdAccess
from server.coordination.net.etcd_client import etcd_ssl_context

__all__ = [
    "PASSWORD_ENV",
    "add_etcd_arguments",
    "etcd_access_from_args",
    "etcd_options_given",
]

#: Where ``--etcd-user``'s password is read from unless ``--etcd-password-env`` says otherwise.
PASSWORD_ENV = "ARENA_ETCD_PASSWORD"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def add_etcd_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``etcd`` option group (TLS and authentication to etcd)."""
    group = parser.add_argument_group(
        "etcd", "how to reach etcd (with an etcd:// or etcds:// address; members are tried in turn)"
    )
    group.add_argument(
        "--etcd-ca",
        default="",
        metavar="PATH",
        help="PEM CA that signed the etcd members' certificates; any TLS file switches the "
        "members to https (etcds:// alone uses the system's CAs)",
    )
    group.add_argument(
        "--etcd-cert",
        default="",
        metavar="PATH",
        help="PEM client certificate, for members run with --client-cert-auth (with --etcd-key)",
    )
    group.add_argument("--etcd-key", default="", metavar="PATH", help="PEM key of --etcd-cert")
    group.add_argument(
        "--etcd-user",
        default="",
        metavar="NAME",
        help="etcd user to authenticate as (etcd's auth enabled); its password comes from "
        "--etcd-password-env or --etcd-password-file",
    )
    group.add_argument(
        "--etcd-password-env",
        default=PASSWORD_ENV,
        metavar="NAME",
        help="environment variable holding --etcd-user's password",
    )
    group.add_argument(
        "--etcd-password-file",
        default="",
        metavar="PATH",
        help="file holding --etcd-user's password (its first line), instead of the variable",
    )


def _password(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    if args.etcd_password_file:
        if not args.etcd_user:
            raise ValueError("--etcd-password-file without --etcd-user: name the user too")
        try:
            with open(args.etcd_password_file, encoding="utf-8") as file:
                lines = file.read().splitlines()
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise ValueError(f"--etcd-password-file {args.etcd_password_file}: {reason}") from None
        except UnicodeDecodeError:
            raise ValueError(
                f"--etcd-password-file {args.etcd_password_file}: not UTF-8 text"
            ) from None
        password = lines[0] if lines else ""
        if not password:
            raise ValueError(f"--etcd-password-file {args.etcd_password_file} is empty")
        return password
    if not args.etcd_user:
        return ""  # (the variable may be set for another process; unused without a user)
    name = args.etcd_password_env
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"--etcd-password-env: {name!r} is not an environment variable name")
    password = environ.get(name, "")
    if not password:
        raise ValueError(
            f"--etcd-user {args.etcd_user!r}: {name} is not set; export the password there "
            "or give --etcd-password-file"
        )
    return password


def etcd_access_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> EtcdAccess:
    """The ``--etcd-*`` options as :class:`EtcdAccess`, the password read and the TLS files
    loaded once to check them; :class:`ValueError` with one line when something is off."""
    access = EtcdAccess(
        ca=args.etcd_ca,
        cert=args.etcd_cert,
        key=args.etcd_key,
        user=args.etcd_user,
        password=_password(args, os.environ if environ is None else environ),
    )
    etcd_ssl_context(access)
    return access


def etcd_options_given(args: argparse.Namespace) -> bool:
    """Whether any ``--etcd-*`` option that only makes sense with etcd was given."""
    return any((args.etcd_ca, args.etcd_cert, args.etcd_key, args.etcd_user,
                args.etcd_password_file))  # fmt: skip
