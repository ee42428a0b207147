"""What ``kubeberth serve`` and ``kubeberth up`` need to be secure by default: a random bearer
token, a self-signed serving certificate for the loopback address, and a private file to hand
both to the user (the kubeconfig).

kubectl sends a bearer token only over HTTPS, so a token alone would lock kubectl out: the
server that generates a token also serves TLS, with a certificate of its own whose PEM the
kubeconfig carries as the cluster's CA. The kubeconfig is created with mode 0600 before a byte
is written to it (then renamed into place), so the token is never readable by others, not
even for a moment.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERT_DAYS = 365


def generate_token() -> str:
    """A bearer token with 256 bits of randomness."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class ServingCert:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def self_signed(cls, host: str) -> ServingCert:
        """A P-256 certificate valid for ``host``, localhost, 127.0.0.1 and ::1; it is its own
        CA (clients trust it through the kubeconfig's certificate-authority-data)."""
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubeberth-apiserver")])
        now = datetime.datetime.now(datetime.UTC)
        sans: list[x509.GeneralName] = [x509.DNSName("localhost"),
                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                        x509.IPAddress(ipaddress.ip_address("::1"))]
        with contextlib.suppress(ValueError):
            address = x509.IPAddress(ipaddress.ip_address(host))
            if address not in sans:
                sans.append(address)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(cert.public_bytes(serialization.Encoding.PEM),
                   key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()))

    def server_context(self) -> ssl.SSLContext:
        """A server TLS context (ssl loads keys only from files: a private temporary
        directory holds them for the call)."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="kubeberth-tls-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            write_private(cert, self.cert_pem)
            write_private(key, self.key_pem)
            ctx.load_cert_chain(str(cert), str(key))
        return ctx


def write_private(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` readable by the owner only: a new file created 0600 beside
    it, then renamed over ``path`` (readers see the old file or the whole new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # created 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
