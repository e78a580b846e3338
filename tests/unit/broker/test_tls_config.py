"""TLS settings without a server: Kafka's SslPrincipalMapper rules, the subject formatted as
Java's X500Principal, the stores (PEM file, PEM inline, PKCS12 from cryptography and from
keytool) and every bad configuration refused with a message naming the key."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from broker.config import ConfigError, KafkaConfig
from broker.tls.keystores import SslSettings, load_keystore, load_truststore
from broker.tls.listeners import TlsListeners
from broker.tls.principal import NoMatchingRuleError, SslPrincipalMapper, distinguished_name
from tests.tls_certs import PASSWORD, CertificateAuthority

# -- principal mapping (cases of Kafka's SslPrincipalMapperTest) ---------------------------------


def test_rules_map_as_kafka() -> None:
    m = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT")
    assert m.name("CN=kafka1,OU=ServiceUsers,O=Org,C=US") == "kafka1"
    assert m.name("CN=duke,OU=JavaSoft,O=Sun Microsystems") == "CN=duke,OU=JavaSoft,O=Sun Microsystems"
    lower = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L")
    assert lower.name("CN=Duke,OU=ServiceUsers,O=Org,L=Santa Clara,ST=CA,C=US") == "duke@serviceusers"
    upper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U")
    assert upper.name("CN=Duke,OU=ServiceUsers,O=Org,L=Santa Clara,ST=CA,C=US") == "DUKE@SERVICEUSERS"
    # commas inside a rule are escaped; several rules, the first that applies wins
    multi = SslPrincipalMapper("RULE:^CN=([^\\,]*),.*$/$1/L, RULE:^(.*)$/x-$1/")
    assert multi.name("CN=Kafka,OU=x") == "kafka"
    assert multi.name("nocn") == "x-nocn"
    # a back reference to a group that does not exist stays literal
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1$2/").name("CN=a") == "a$2"


def test_no_rule_applies() -> None:
    with pytest.raises(NoMatchingRuleError):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=duke,OU=JavaSoft")


@pytest.mark.parametrize("rules", ["DEFAU", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/LU", "RULE:/", "RULE:x"])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_subject_formatted_as_java_x500_principal() -> None:
    name = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "A, B"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), x509.NameAttribute(NameOID.COMMON_NAME, "app"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
    ])
    # last RDN first, RFC 2253 escaping, an attribute without keyword as OID=#<DER hex> (IA5String)
    assert distinguished_name(name) == "1.2.840.113549.1.9.1=#1605614062 2e63".replace(" ", "") + \
        ",CN=app,OU=eng,O=A\\, B,C=US"


# -- stores ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("certs"))


def settings(**props: str) -> SslSettings:
    return SslSettings.of({k.replace("_", "."): v for k, v in props.items()}, "SSL")


def test_keystores_of_every_form_load_the_same_identity(ca: CertificateAuthority) -> None:
    b = ca.issue("b1", "b1")
    forms = [
        settings(ssl_keystore_type="PEM", ssl_keystore_location=str(b.pem_file())),
        settings(ssl_keystore_type="PEM", ssl_keystore_location=str(b.pem_file(PASSWORD)), ssl_key_password=PASSWORD),
        {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": b.cert_pem, "ssl.keystore.key": b.key_pem()},
        settings(ssl_keystore_type="PKCS12", ssl_keystore_location=str(b.pkcs12_file()), ssl_keystore_password=PASSWORD),
        # Kafka's default type JKS reads a PKCS12 file, as Java does
        settings(ssl_keystore_location=str(b.pkcs12_file()), ssl_keystore_password=PASSWORD),
    ]
    for form in forms:
        s = form if isinstance(form, SslSettings) else SslSettings.of(form, "SSL")
        store = load_keystore(s)
        assert store.chain[0] == b.cert


def test_keytool_truststore_and_pem_truststore(ca: CertificateAuthority) -> None:
    java = settings(ssl_truststore_type="PKCS12", ssl_truststore_location=str(ca.java_truststore()),
                    ssl_truststore_password=PASSWORD)
    assert load_truststore(java) == [ca.cert]
    inline = SslSettings.of({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.cert_pem}, "SSL")
    assert load_truststore(inline) == [ca.cert]


def listeners_config(ca: CertificateAuthority, **props: str) -> KafkaConfig:
    return KafkaConfig({"listeners": "PLAINTEXT://:0,SSL://:0", **{k.replace("_", "."): v for k, v in props.items()}})


def refused(config: KafkaConfig) -> str:
    with pytest.raises(ConfigError) as e:
        TlsListeners(config)
    return str(e.value)


def test_ssl_listener_without_keystore_is_refused(ca: CertificateAuthority) -> None:
    assert "Missing required configuration ssl.keystore.location" in refused(listeners_config(ca))


def test_unreadable_keystore_is_refused(ca: CertificateAuthority, tmp_path: Path) -> None:
    message = refused(listeners_config(ca, ssl_keystore_location=str(tmp_path / "missing.p12")))
    assert "configuration ssl.keystore.location: cannot read it" in message


def test_wrong_keystore_password_is_refused(ca: CertificateAuthority) -> None:
    b = ca.issue("b2", "b2")
    message = refused(listeners_config(ca, ssl_keystore_type="PKCS12", ssl_keystore_location=str(b.pkcs12_file()),
                                       ssl_keystore_password="wrong"))
    assert "configuration ssl.keystore.password" in message


def test_encrypted_pem_key_without_password_is_refused(ca: CertificateAuthority) -> None:
    b = ca.issue("b3", "b3")
    message = refused(listeners_config(ca, ssl_keystore_type="PEM", ssl_keystore_location=str(b.pem_file(PASSWORD))))
    assert "configuration ssl.key.password" in message


def test_jks_keystore_is_refused_naming_pkcs12_and_pem(ca: CertificateAuthority, tmp_path: Path) -> None:
    jks = tmp_path / "broker.jks"
    subprocess.run(["keytool", "-genkeypair", "-alias", "b", "-keyalg", "EC", "-dname", "CN=b", "-storetype", "JKS",
                    "-keystore", str(jks), "-storepass", PASSWORD, "-keypass", PASSWORD],
                   check=True, capture_output=True, timeout=60)
    message = refused(listeners_config(ca, ssl_keystore_location=str(jks), ssl_keystore_password=PASSWORD))
    assert "JKS" in message and "PKCS12" in message and "PEM" in message and "ssl.keystore.location" in message


def test_per_listener_keys_are_named_in_errors(ca: CertificateAuthority, tmp_path: Path) -> None:
    b = ca.issue("b4", "b4")
    config = KafkaConfig({
        "listeners": "INTERNAL://:0,EXTERNAL://:0", "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(b.pem_file()),
        "listener.name.internal.ssl.keystore.location": str(tmp_path / "nope.pem")})
    assert "configuration listener.name.internal.ssl.keystore.location: cannot read it" in refused(config)


def test_per_listener_overrides_build_each_listener_its_context(ca: CertificateAuthority) -> None:
    b = ca.issue("b5", "b5")
    config = KafkaConfig({
        "listeners": "INTERNAL://:0,CLIENTS://:0", "listener.security.protocol.map": "INTERNAL:SSL,CLIENTS:SSL",
        "inter.broker.listener.name": "INTERNAL", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(b.pem_file()),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_file()),
        "listener.name.internal.ssl.client.auth": "required", "ssl.enabled.protocols": "TLSv1.3",
        "ssl.endpoint.identification.algorithm": ""})
    tls = TlsListeners(config)
    internal, clients = tls.server_context("INTERNAL"), tls.server_context("CLIENTS")
    assert internal is not None and clients is not None
    assert internal.verify_mode == ssl.CERT_REQUIRED and clients.verify_mode == ssl.CERT_NONE
    assert internal.minimum_version == ssl.TLSVersion.TLSv1_3
    client = tls.client_context("INTERNAL")
    assert client is not None and client.check_hostname is False and client.verify_mode == ssl.CERT_REQUIRED
    assert tls.client_context("PLAINTEXT") is None


def test_cipher_suites_java_names(ca: CertificateAuthority) -> None:
    b = ca.issue("b6", "b6")
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(b.pem_file())}
    ctx = TlsListeners(KafkaConfig({"listeners": "SSL://:0", **base,
                                    "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256"}
                                   )).server_context("SSL")
    assert ctx is not None
    names = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES256-GCM-SHA384"}
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites: unknown or disabled cipher suite TLS_NOPE"):
        TlsListeners(KafkaConfig({"listeners": "SSL://:0", **base, "ssl.cipher.suites": "TLS_NOPE"}))


def test_protocol_settings_refused() -> None:
    with pytest.raises(ConfigError, match=r"security protocol KERBEROS, which is not supported"):
        KafkaConfig({"listeners": "X://:0", "listener.security.protocol.map": "X:KERBEROS"})
    with pytest.raises(ConfigError, match=r"Only one of inter\.broker\.listener\.name and security\.inter\.broker\.protocol"):
        KafkaConfig({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"})
    assert KafkaConfig({"security.inter.broker.protocol": "SSL", "listeners": "SSL://:0"}).inter_broker_listener_name == "SSL"
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth"):
        KafkaConfig({"ssl.client.auth": "maybe"})
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name must be a listener name defined in "
                                          r"advertised\.listeners\. The valid options .* are PLAINTEXT"):
        KafkaConfig({"zookeeper.connect": "zk:2181", "security.inter.broker.protocol": "SSL"})
