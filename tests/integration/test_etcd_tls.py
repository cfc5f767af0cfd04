"""The etcd coordinator against a real etcd that speaks TLS and asks its clients for a
certificate (``--client-cert-auth``): ``--etcd-ca/--etcd-cert/--etcd-key`` reach it, and a
client without a certificate does not."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from launch.etcd_local import EtcdProcess, EtcdTls, EtcdUnavailable, running_etcd
from server.coordination import CoordinatorUnavailable
from server.coordination.etcd_config import EtcdAccess
from server.coordination.net import EtcdCoordinator, make_coordinator
from tests.integration.etcd import etcd_binary

pytestmark = pytest.mark.integration


def _write(path: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_tls(folder: Path) -> EtcdTls:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "arena test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    _write(folder / "ca", ca_key, ca)
    # etcd's JSON gateway dials etcd's own gRPC port with the server's certificate, so that
    # certificate is a client's too.
    for name, usages in (
        ("server", [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
        ("client", [ExtendedKeyUsageOID.CLIENT_AUTH]),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _write(folder / name, key, cert)
    return EtcdTls(
        ca=str(folder / "ca.pem"),
        server_cert=str(folder / "server.pem"),
        server_key=str(folder / "server.key"),
        client_cert=str(folder / "client.pem"),
        client_key=str(folder / "client.key"),
    )


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[tuple[EtcdProcess, EtcdTls]]:
    tls = make_tls(tmp_path)
    try:
        with running_etcd(etcd_binary(), tls=tls) as etcd:
            yield etcd, tls
    except EtcdUnavailable as error:
        pytest.fail(str(error), pytrace=False)


async def test_the_tls_options_reach_an_etcd_that_wants_client_certificates(
    tls_etcd: tuple[EtcdProcess, EtcdTls],
) -> None:
    etcd, tls = tls_etcd
    assert etcd.endpoint.startswith("etcds://127.0.0.1:")
    access = EtcdAccess(ca=tls.ca, cert=tls.client_cert, key=tls.client_key)
    # etcd:// with TLS files is https too.
    plain_spelling = etcd.endpoint.replace("etcds://", "etcd://")
    for address in (etcd.endpoint, plain_spelling):
        leader = make_coordinator(address, node_id="a", region="test", etcd_access=access)
        assert isinstance(leader, EtcdCoordinator)
        assert leader.endpoint == etcd.url
        await leader.start()
        try:
            epoch = await leader.claim_initial(node_id="a", url="http://a")
            assert await leader.confirm() is True
            assert await leader.leader() == ("a", "http://a", epoch)
        finally:
            await leader.close()

    # Without the CA, etcd's certificate is not trusted; without a client certificate,
    # etcd does not let it in: either way unavailable, in one line.
    for refused in (EtcdAccess(), EtcdAccess(ca=tls.ca)):
        stranger = make_coordinator(etcd.endpoint, node_id="b", etcd_access=refused)
        with pytest.raises(CoordinatorUnavailable) as info:
            await stranger.start()
        assert "\n" not in str(info.value)
