"""The etcd address grammar and the ``--etcd-*`` options, shared by the node and the
directory: what parses, and the one line each mistake gets."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from server.coordination.etcd_config import EtcdAccess, EtcdCluster, parse_etcd_address
from server.coordination.net import EtcdCoordinator, make_coordinator
from server.coordination.net.etcd_options import add_etcd_arguments, etcd_access_from_args
from server.directory.net import cli as directory_cli
from server.net import cli as node_cli


@pytest.mark.parametrize(
    ("spec", "members"),
    [
        ("etcd://127.0.0.1:2379", ("http://127.0.0.1:2379",)),
        (
            "etcd://h1:2379,h2:2379,h3:2379",
            ("http://h1:2379", "http://h2:2379", "http://h3:2379"),
        ),
        ("etcds://h1:2379,[::1]:2379", ("https://h1:2379", "https://[::1]:2379")),
    ],
)
def test_addresses_list_the_members_in_order(spec: str, members: tuple[str, ...]) -> None:
    assert parse_etcd_address(spec) == members


def test_tls_files_switch_every_member_to_https() -> None:
    assert parse_etcd_address("etcd://h1:1,h2:2", tls=True) == ("https://h1:1", "https://h2:2")
    cluster = EtcdCluster.from_address("etcd://h1:1", EtcdAccess(ca="/ca.pem"))
    assert cluster.endpoints == ("https://h1:1",)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty etcd address"),
        ("http://h:1", "expected etcd://HOST:PORT"),
        ("etcd://", "nothing else"),
        ("etcd://h1:1,,h2:2", "nothing else"),
        ("etcd://h1:1, h2:2", "nothing else"),
        ("etcd://h1:1,h2", "missing port"),
        ("etcd://h1:1,:2", "missing host"),
        ("etcd://h1:1,h2:99999", "bad port"),
        ("etcd://h1:1,h2:x", "bad port"),
        ("etcd://h1:1/v3", "nothing else"),
        ("etcd://user:pw@h1:1", "nothing else"),
        ("etcd://h1:1,h1:1", "listed twice"),
    ],
)
def test_a_bad_address_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_etcd_address(spec)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cert": "c.pem"}, "--etcd-cert and --etcd-key go together"),
        ({"key": "k.pem"}, "--etcd-cert and --etcd-key go together"),
        ({"user": "arena"}, "has no password"),
        ({"password": "pw"}, "without --etcd-user"),
    ],
)
def test_access_that_does_not_fit_together_is_refused(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EtcdAccess(**fields)


def test_the_password_never_shows_in_a_repr() -> None:
    access = EtcdAccess(user="arena", password="hunter2-hunter2")
    assert "hunter2" not in repr(access)
    assert "hunter2" not in repr(EtcdCluster(("http://h:1",), access))


def options(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_etcd_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_password_comes_from_the_variable_or_a_file(tmp_path: Path) -> None:
    env = {"ARENA_ETCD_PASSWORD": "from-env", "OTHER": "other"}
    assert etcd_access_from_args(options("--etcd-user", "arena"), env).password == "from-env"
    named = options("--etcd-user", "arena", "--etcd-password-env", "OTHER")
    assert etcd_access_from_args(named, env).password == "other"
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    from_file = options("--etcd-user", "arena", "--etcd-password-file", str(secret))
    assert etcd_access_from_args(from_file, env).password == "from-file"
    # A variable with no user asks for nothing.
    assert etcd_access_from_args(options(), env) == EtcdAccess()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--etcd-user", "arena"], "ARENA_ETCD_PASSWORD is not set"),
        (["--etcd-user", "arena", "--etcd-password-env", "1BAD"], "not an environment variable"),
        (["--etcd-user", "arena", "--etcd-password-file", "/nonexistent/pw"], "No such file"),
        (["--etcd-password-file", "/nonexistent/pw"], "without --etcd-user"),
        (["--etcd-ca", "/nonexistent/ca.pem"], "no such file"),
        (["--etcd-cert", "/nonexistent/c.pem"], "go together"),
    ],
)
def test_bad_options_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        etcd_access_from_args(options(*argv), {})
    assert "\n" not in str(info.value)


def test_a_file_that_is_no_certificate_is_one_line(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="unusable certificate") as info:
        etcd_access_from_args(options("--etcd-ca", str(ca)), {})
    assert "\n" not in str(info.value)


def test_the_coordinator_takes_every_member() -> None:
    c = make_coordinator("etcd://h1:2379,h2:2379", node_id="a", region="eu")
    assert isinstance(c, EtcdCoordinator)
    assert c.client.endpoints == ("http://h1:2379", "http://h2:2379")
    assert c.endpoint == "http://h1:2379"
    secure = make_coordinator(
        "etcds://h1:2379", node_id="a", etcd_access=EtcdAccess(user="u", password="p")
    )
    assert isinstance(secure, EtcdCoordinator)
    assert secure.client.endpoints == ("https://h1:2379",)
    assert secure.client.cluster.access.user == "u"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--registry", "etcd://h1:1,h1:1"], "--registry: bad etcd address"),
        (["--registry", "redis://h:1"], "neither 'memory' nor etcd://"),
        (["--etcd-user", "arena"], "need an etcd:// or etcds:// --registry"),
        (["--registry", "etcd://h:1", "--etcd-user", "arena"], "ARENA_ETCD_PASSWORD is not set"),
    ],
)
def test_the_directory_says_what_is_wrong_in_one_line(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ARENA_ETCD_PASSWORD", raising=False)
    assert directory_cli.main([*argv, "--insecure-dev-secret", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--etcd-ca", "/ca.pem"], "need an etcd:// or etcds:// --coordinator"),
        (["--coordinator", "etcd://h:1,h:x"], "bad port"),
    ],
)
def test_the_node_says_what_is_wrong_in_one_line(argv: list[str], message: str) -> None:
    args = node_cli.build_parser().parse_args(argv)
    with pytest.raises(ValueError, match=message) as info:
        node_cli.config_from_args(args)
    assert "\n" not in str(info.value)
