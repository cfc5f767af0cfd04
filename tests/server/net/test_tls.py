"""TLS: a node started with a certificate serves /health over https and players over wss,
a standby with the CA follows it, and the flags fail in one line when they are off."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import aiohttp
import pytest

from client_sim import websocket
from client_sim.cli import build_parser as bots_parser
from client_sim.cli import parse_run
from client_sim.latency import draw_bot, parse_distribution
from client_sim.swarm import Swarm, SwarmConfig
from client_sim.websocket import TlsTrust
from server.net.cli import build_parser, config_from_args
from server.net.config import NodeConfig
from server.net.tls import client_context, server_context
from tests.server.replication.test_replication_link import WAIT_S, bind, cluster, until


def make_certificate(folder: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (made with openssl) and its key, in
    ``folder``; the test is skipped where openssl is missing."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


def trusting(cert: str) -> aiohttp.ClientSession:
    """An HTTP client that trusts the test's certificate."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(cert)))


async def test_a_tls_node_serves_https_and_a_bot_plays_over_wss(
    certificate: tuple[str, str],
) -> None:
    cert, key = certificate
    async with cluster() as (nodes, _plain), trusting(cert) as session:
        node = await nodes.start(bind(), server_context(cert, key), node_id="alpha", role="primary")
        assert node.url.startswith("https://127.0.0.1:")

        async with session.get(node.url + "/health") as answer:
            assert answer.status == 200
            assert (await answer.json())["role"] == "primary"

        url = node.url.replace("https://", "wss://") + "/ws"
        bots = (draw_bot(0, seed=1, rtt=parse_distribution("20ms")),)
        swarm = Swarm(SwarmConfig(url=url, bots=bots, duration=1.0, tls=TlsTrust(ca=cert)))
        result = await swarm.run()

        assert result.connected == 1
        assert swarm.bots[0].snapshot_count > 5


async def test_a_certificate_nobody_vouches_for_is_refused(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    async with cluster() as (nodes, _session):
        node = await nodes.start(bind(), server_context(cert, key), node_id="alpha")
        url = node.url.replace("https://", "wss://") + "/ws"

        with pytest.raises(ssl.SSLCertVerificationError):
            async with asyncio.timeout(WAIT_S):
                await websocket.connect(url, lambda _: None, lambda: None, max_size=1 << 20)
        # (tests only) --insecure takes any certificate
        insecure = TlsTrust(insecure=True)
        client = await websocket.connect(
            url, lambda _: None, lambda: None, max_size=1 << 20, tls=insecure
        )
        await client.close()


async def test_a_standby_with_the_ca_follows_an_https_primary(
    certificate: tuple[str, str],
) -> None:
    cert, key = certificate
    async with cluster() as (nodes, _plain), trusting(cert) as session:
        primary = await nodes.start(
            bind(), server_context(cert, key), node_id="alpha", role="primary"
        )
        standby = await nodes.start(
            bind(),
            node_id="beta",
            role="standby",
            primary_url=primary.url,
            peers=(primary.url,),
            tls_ca=cert,
        )

        async def following() -> bool:
            async with session.get(primary.admin_url + "/health") as answer:
                links = (await answer.json())["standbys"]
            return [link["node"] for link in links] == ["beta"]

        await until(following, "beta follows the https primary")
        assert standby.node.follower.primary_id == "alpha"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--tls-cert", "cert.pem"], "give --tls-cert and --tls-key together"),
        (["--tls-key", "key.pem"], "give --tls-cert and --tls-key together"),
        (["--tls-ca", "/nonexistent/ca.pem"], "--tls-ca /nonexistent/ca.pem: no such file"),
    ],
)
def test_tls_flags_that_do_not_fit_fail_in_one_line(argv: list[str], error: str) -> None:
    with pytest.raises(ValueError, match=error) as refused:
        config_from_args(build_parser().parse_args(argv))
    assert "\n" not in str(refused.value)


def test_the_tls_flags_are_passed_on(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    argv = ["--tls-cert", cert, "--tls-key", key, "--tls-ca", cert]
    config = config_from_args(build_parser().parse_args(argv))

    assert (config.tls_cert, config.tls_key, config.tls_ca) == (cert, key, cert)
    assert isinstance(server_context(config.tls_cert, config.tls_key), ssl.SSLContext)
    assert NodeConfig().tls_cert == ""


def test_a_listener_that_cannot_be_made_fails_in_one_line(
    certificate: tuple[str, str], tmp_path: Path
) -> None:
    cert, key = certificate
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")

    for args, error in (
        ((str(tmp_path / "none.pem"), key), "no such file"),
        ((str(garbage), key), "not a PEM certificate and its key"),
        ((cert, str(garbage)), "not a PEM certificate and its key"),
    ):
        with pytest.raises(ValueError, match=error) as refused:
            server_context(*args)
        assert "\n" not in str(refused.value)


def test_arena_bots_takes_a_ca_and_refuses_one_it_cannot_read(
    certificate: tuple[str, str], tmp_path: Path
) -> None:
    cert, _key = certificate
    server = ["--server", "wss://127.0.0.1:1/ws"]

    run = parse_run(bots_parser().parse_args([*server, "--ca", cert]))
    assert run.tls == TlsTrust(ca=cert)
    assert all(config.tls == run.tls for config in run.swarm_configs())
    assert parse_run(bots_parser().parse_args([*server, "--insecure"])).tls.insecure
    with pytest.raises(ValueError, match="--ca"):
        parse_run(bots_parser().parse_args([*server, "--ca", str(tmp_path / "none.pem")]))
