"""A test certificate authority: a CA, and certificates it signs for agents and callers, as
PEM files (keys mode 0600), made with `cryptography` in the test — no openssl, no network;
and an agent process serving HTTPS, with clients that trust the CA."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support import AgentProcess

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as files."""

    cert: Path
    key: Path


class TestCA:
    """A certificate authority whose files live in `directory`."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, directory: Path, name: str = "a2a-handoff test CA") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.subject = subject
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        self.cert = directory / "ca.pem"
        self.cert.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        name: str,
        *,
        uris: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = ("127.0.0.1",),
    ) -> Issued:
        """A certificate for `name` (its CN; files NAME.pem and NAME.key) with these subject
        alternative names, good for serving and for client authentication."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(u) for u in uris]
        names += [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + _DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        issued = Issued(self.directory / f"{name}.pem", self.directory / f"{name}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        fd = os.open(issued.key, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        return issued


@dataclass
class TlsAgent(AgentProcess):
    """An agent serving HTTPS; readiness asked with `identity`'s certificate (if any)."""

    ca: Path | None = None
    identity: Issued | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"

    def wait_ready(self, timeout: float = 20.0) -> None:
        assert self.ca is not None
        deadline = time.monotonic() + timeout
        with client(self.ca, self.identity) as http:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
                try:
                    if http.get(self.url + "health", timeout=1.0).status_code in (200, 503):
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"{self.name} did not serve HTTPS on port {self.port}")


def client(ca: Path, identity: Issued | None = None) -> httpx.Client:
    """A plain httpx client trusting `ca`, presenting `identity`'s certificate if given."""
    context = ssl.create_default_context(cafile=str(ca))
    if identity is not None:
        context.load_cert_chain(identity.cert, identity.key)
    return httpx.Client(verify=context, timeout=30.0)
