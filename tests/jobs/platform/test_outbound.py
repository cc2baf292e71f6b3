"""Where webhook requests may go, and that they go exactly there.

The address table covers every spelling of a non-global address the policy must refuse
(IPv4-mapped, 6to4, NAT64, Teredo, 100.64.0.0/10, the ranges `is_global` misses) beside
globally routable ones it must allow. The requests go to real servers on loopback: a plain
HTTP one, and a TLS one whose certificate is made here, to show that the connection is
pinned to the checked address while the Host header and the certificate check keep the name.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from archsearch.jobs.platform import outbound
from archsearch.jobs.platform.outbound import INTERNAL, LOOPBACK, TargetPolicy, UnsafeTarget

TEAM = TargetPolicy(allow_loopback=False, allow_private=False)
EMBEDDED = TargetPolicy(allow_loopback=True, allow_private=False)
ADMIN_ALLOWED = TargetPolicy(allow_loopback=True, allow_private=True)

GLOBAL = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "100.63.255.255",  # just below the shared address space
    "100.128.0.0",  # just above it
    "172.32.0.1",
    "192.0.1.1",
    "198.20.0.1",
    "223.255.255.254",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:81b::200e",
    "::ffff:8.8.8.8",
    "2002:808:808::1",  # 6to4 of a global address
    "64:ff9b::808:808",  # NAT64 of a global address
    "2620:4f:8000::",
]
REFUSED = [
    ("127.0.0.1", LOOPBACK),
    ("127.255.255.254", LOOPBACK),
    ("::1", LOOPBACK),
    ("::ffff:127.0.0.1", LOOPBACK),
    ("0.0.0.0", INTERNAL),
    ("0.1.2.3", INTERNAL),
    ("10.0.0.1", INTERNAL),
    ("100.64.0.1", INTERNAL),
    ("100.100.100.200", INTERNAL),  # a cloud's metadata service in the shared space
    ("100.127.255.254", INTERNAL),
    ("169.254.169.254", INTERNAL),
    ("172.16.0.1", INTERNAL),
    ("172.31.255.255", INTERNAL),
    ("192.0.0.1", INTERNAL),
    ("192.0.0.9", INTERNAL),
    ("192.0.0.170", INTERNAL),
    ("192.0.2.1", INTERNAL),
    ("192.88.99.1", INTERNAL),
    ("192.168.1.1", INTERNAL),
    ("198.18.0.1", INTERNAL),
    ("198.51.100.1", INTERNAL),
    ("203.0.113.1", INTERNAL),
    ("224.0.0.1", INTERNAL),
    ("224.0.1.1", INTERNAL),
    ("233.252.0.1", INTERNAL),
    ("239.255.255.250", INTERNAL),
    ("240.0.0.1", INTERNAL),
    ("255.255.255.255", INTERNAL),
    ("::", INTERNAL),
    ("::127.0.0.1", INTERNAL),  # IPv4-compatible, deprecated
    ("::8.8.8.8", INTERNAL),
    ("::ffff:10.0.0.1", INTERNAL),
    ("::ffff:169.254.169.254", INTERNAL),
    ("::ffff:100.100.100.200", INTERNAL),
    ("::ffff:0:8.8.8.8", INTERNAL),  # IPv4-translated
    ("2002:a9fe:a9fe::1", INTERNAL),  # 6to4 of 169.254.169.254
    ("2002:7f00:1::1", INTERNAL),  # 6to4 of 127.0.0.1
    ("2002:0a00:0001::", INTERNAL),
    ("2002:6464:64c8::", INTERNAL),  # 6to4 of 100.100.100.200
    ("64:ff9b::a9fe:a9fe", INTERNAL),  # NAT64 of 169.254.169.254
    ("64:ff9b::7f00:1", INTERNAL),  # NAT64 of 127.0.0.1
    ("64:ff9b::a00:1", INTERNAL),
    ("64:ff9b:1::808:808", INTERNAL),  # local-use NAT64
    ("2001::1", INTERNAL),  # Teredo
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", INTERNAL),
    ("2001:db8::1", INTERNAL),
    ("2001:20::1", INTERNAL),
    ("3fff::1", INTERNAL),
    ("3ffe::1", INTERNAL),
    ("5f00::1", INTERNAL),
    ("100::1", INTERNAL),
    ("fc00::1", INTERNAL),
    ("fd12:3456::1", INTERNAL),
    ("fe80::1", INTERNAL),
    ("fec0::1", INTERNAL),
    ("ff02::1", INTERNAL),
    ("ff0e::1", INTERNAL),
]


@pytest.mark.parametrize("address", GLOBAL)
def test_a_global_address_is_allowed(address: str) -> None:
    assert outbound.not_global(ipaddress.ip_address(address)) is None
    outbound.check_address(ipaddress.ip_address(address), "example.org", TEAM)


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_a_non_global_address_is_refused_in_team_mode(address: str, kind: str) -> None:
    parsed = ipaddress.ip_address(address)
    assert outbound.not_global(parsed) == kind
    with pytest.raises(UnsafeTarget, match="ARCHSEARCH_WEBHOOK_ALLOW_PRIVATE_TARGETS"):
        outbound.check_address(parsed, "example.org", TEAM)
    outbound.check_address(parsed, "example.org", ADMIN_ALLOWED)  # the admin's setting


def test_the_table_is_large_enough() -> None:
    assert len(GLOBAL) + len(REFUSED) >= 50


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "::ffff:127.0.0.1"])
def test_embedded_mode_allows_loopback_and_nothing_else_internal(address: str) -> None:
    outbound.check_address(ipaddress.ip_address(address), "localhost", EMBEDDED)
    for other in ("10.0.0.1", "100.100.100.200", "2002:7f00:1::1", "64:ff9b::7f00:1"):
        with pytest.raises(UnsafeTarget):
            outbound.check_address(ipaddress.ip_address(other), "x", EMBEDDED)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://2130706433/x",  # 127.0.0.1 as one number
        "http://0x7f.1/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[2002:a9fe:a9fe::1]/latest",
        "http://100.100.100.200/latest/meta-data",
        "http://localhost:9/x",
        "ftp://example.org/x",
        "http:///x",
    ],
)
def test_urls_to_internal_places_are_refused(url: str) -> None:
    with pytest.raises(UnsafeTarget):
        outbound.check_target(url, TEAM)


# --- real requests ---------------------------------------------------------------------


class Seen:
    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.paths: list[str] = []


@contextmanager
def _serve(context: ssl.SSLContext | None, seen: Seen) -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            self.rfile.read(int(self.headers.get("content-length", 0)))
            seen.hosts.append(self.headers["host"])
            seen.paths.append(self.path)
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
            else:
                self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _certificate(directory: Path, names: list[str]) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for `names`: (CA, certificate, key) files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "archsearch test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def _tls_post(tmp_path: Path, names: list[str], seen: Seen) -> outbound.Outcome:
    ca, cert, key = _certificate(tmp_path, names)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(ca))
    with _serve(server_context, seen) as port:
        with httpx.Client(verify=client_context, timeout=5, trust_env=False) as client:
            return outbound.post(client, f"https://localhost:{port}/hook", b"{}", {}, EMBEDDED)


def test_tls_goes_to_the_checked_address_and_checks_the_name(tmp_path: Path) -> None:
    seen = Seen()
    outcome = _tls_post(tmp_path, ["localhost"], seen)
    assert outcome.ok, outcome
    assert seen.hosts and seen.hosts[0].startswith("localhost:")  # the name, not the address


def test_tls_refuses_a_certificate_for_another_name(tmp_path: Path) -> None:
    seen = Seen()
    outcome = _tls_post(tmp_path, ["elsewhere.test"], seen)
    assert not outcome.ok and outcome.error is not None
    assert "certificate" in outcome.error.lower(), outcome.error
    assert seen.hosts == []


def test_a_redirect_is_a_failure_and_is_not_followed() -> None:
    seen = Seen()
    with _serve(None, seen) as port:
        with httpx.Client(timeout=5, trust_env=False) as client:
            outcome = outbound.post(client, f"http://localhost:{port}/moved", b"{}", {}, EMBEDDED)
    assert outcome.status_code == 302 and not outcome.ok
    assert seen.paths == ["/moved"]
    assert seen.hosts[0].startswith("localhost:")


def test_a_loopback_name_is_refused_before_any_connection_in_team_mode() -> None:
    seen = Seen()
    with _serve(None, seen) as port:
        with httpx.Client(timeout=5, trust_env=False) as client:
            outcome = outbound.post(client, f"http://localhost:{port}/x", b"{}", {}, TEAM)
    assert outcome.error is not None and "UnsafeTarget" in outcome.error
    assert seen.paths == []
