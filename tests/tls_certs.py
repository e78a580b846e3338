"""Certificates for the TLS tests, made with `cryptography`: a CA, broker certificates with
SAN 127.0.0.1/localhost, client certificates, as PEM files, PKCS12 stores (cryptography) and a
PKCS12 truststore made by Java's `keytool` (what a Java client is configured with)."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "test-secret"


def _name(cn: str, ou: str | None = None, o: str = "Odradek Tests") -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)]
    if ou is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Identity:
    """A key and its certificate (signed by the CA), written as files under `dir`."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    ca: x509.Certificate
    dir: Path

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def key_pem(self, password: str | None = None) -> str:
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc).decode()

    def pem_file(self, password: str | None = None) -> Path:
        """Key then certificate in one PEM file (Kafka's PEM keystore file)."""
        path = self.dir / f"{self.name}{'-enc' if password else ''}.pem"
        path.write_text(self.key_pem(password) + self.cert_pem)
        return path

    def cert_file(self) -> Path:
        path = self.dir / f"{self.name}.crt"
        path.write_text(self.cert_pem)
        return path

    def key_file(self) -> Path:
        path = self.dir / f"{self.name}.key"
        path.write_text(self.key_pem())
        return path

    def pkcs12_file(self, password: str = PASSWORD) -> Path:
        path = self.dir / f"{self.name}.p12"
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            self.name.encode(), self.key, self.cert, [self.ca],
            serialization.BestAvailableEncryption(password.encode())))
        return path


class CertificateAuthority:
    def __init__(self, dir: Path, cn: str = "Odradek Test CA") -> None:
        self.dir = dir
        dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = _name(cn)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def ca_file(self) -> Path:
        path = self.dir / "ca.crt"
        path.write_text(self.cert_pem)
        return path

    def issue(self, name: str, cn: str, *, server: bool = True, ou: str | None = None,
              hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Identity:
        """A certificate for a broker (SAN `hosts`, server and client use) or a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(_name(cn, ou)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        return Identity(name, key, builder.sign(self.key, hashes.SHA256()), self.cert, self.dir)

    def java_truststore(self, password: str = PASSWORD) -> Path:
        """A PKCS12 truststore holding the CA, made by Java's keytool (as a Kafka user makes it)."""
        path = self.dir / "truststore.p12"
        path.unlink(missing_ok=True)
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_file()),
                        "-keystore", str(path), "-storetype", "PKCS12", "-storepass", password],
                       check=True, capture_output=True, timeout=60)
        return path
