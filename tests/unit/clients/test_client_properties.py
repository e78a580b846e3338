"""Kafka client properties -> kafka-python / librdkafka settings (clients/client_properties.py),
the Java .properties syntax (broker/java_properties.py) and the SASL settings' JAAS entry
(broker/sasl/jaas.py, its syntax in tests/unit/broker/test_jaas.py).
Pure logic over files the tests write; the TLS end to end is tests/integration/test_cli_command_config.py."""

from __future__ import annotations

import pickle
import ssl
import warnings
from pathlib import Path

import pytest

from broker.java_properties import parse_properties
from clients.client_properties import ClientConfigError, ClientProperties, read_command_config
from spark_connector.errors import OptionError
from spark_connector.options import kafka_client_config
from tests.tls_certs import PASSWORD, CertificateAuthority, Identity

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertificateAuthority, Identity]:
    ca = CertificateAuthority(tmp_path_factory.mktemp("certs"))
    return ca, ca.issue("client", "app1", server=False)


def test_properties_syntax_is_javas() -> None:
    text = ("# comment \\\n"
            "! another\n"
            "  a = 1 \n"
            "b:2\n"
            "c 3\n"
            "d\n"
            "key\\=with\\:seps = v=w:x\n"
            "e=one \\\n     two\\\\\n"
            "f=\\u00e9\\t\\x\r\n"
            "sasl.jaas.config=m required \\\n  username=\"u\" \\\n  password=\"p\";\n"
            "a=last wins\n")
    assert parse_properties(text) == {
        "a": "last wins", "b": "2", "c": "3", "d": "", "key=with:seps": "v=w:x", "e": "one two\\",
        "f": "é\tx", "sasl.jaas.config": 'm required username="u" password="p";'}
    with pytest.raises(ValueError, match=r"uxxxx"):
        parse_properties("a=\\u12")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "scram-sha-512"])
@pytest.mark.parametrize("module", [PLAIN, SCRAM])
def test_sasl_maps_to_kafka_python_and_librdkafka(mechanism: str, module: str) -> None:
    p = ClientProperties({"security.protocol": "sasl_plaintext", "sasl.mechanism": mechanism,
                          "sasl.jaas.config": f'{module} required username="alice" password="alice-secret";'})
    assert p.kafka_python("admin") == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism.upper(),
                                       "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    assert p.librdkafka() == {"security.protocol": "sasl_plaintext", "sasl.mechanisms": mechanism.upper(),
                              "sasl.username": "alice", "sasl.password": "alice-secret"}


@pytest.mark.parametrize(("values", "key", "why"), [
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism", "unset, so Kafka's default GSSAPI"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism", "GSSAPI cannot be used"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism", "OAUTHBEARER"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config", "is required"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}, "sasl.jaas.config", "Krb5LoginModule"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": f'{SCRAM} required username="a" password="b" tokenauth="true";'}, "sasl.jaas.config", "tokenauth"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.login.callback.handler.class": "x.Y"},
     "sasl.login.callback.handler.class", "not a SASL setting"),
    ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism", "security.protocol is PLAINTEXT"),
    ({"security.protocol": "SASL_PLAINTEXT", "ssl.truststore.location": "x"}, "ssl.truststore.location",
     "security.protocol is SASL_PLAINTEXT"),
    ({"security.protocol": "SSL", "ssl.provider": "SunJSSE"}, "ssl.provider", "not a TLS setting"),
    ({"security.protocol": "SSL", "ssl.keymanager.algorithm": "PKIX"}, "ssl.keymanager.algorithm", "SunX509"),
    ({"security.protocol": "TLS"}, "security.protocol", "not one of"),
    ({"no.such.setting": "1"}, "no.such.setting", "not a client setting"),
    ({"request.timeout.ms": "soon"}, "request.timeout.ms", "not a valid value"),
    ({"partitioner": "com.example.P"}, "partitioner", "cannot be set from a string"),
])
def test_a_key_that_cannot_be_honoured_is_refused_naming_it(values: dict[str, str], key: str, why: str) -> None:
    with pytest.raises(ClientConfigError, match=why) as info:
        ClientProperties(values)
    assert info.value.key == key


def test_common_keys_go_to_the_clients_that_have_them() -> None:
    p = ClientProperties({"client.id": "ops", "request.timeout.ms": "15000", "acks": "all", "bootstrap.servers": "x:1",
                          "isolation.level": "read_committed", "key.deserializer": "org.apache.StringDeserializer",
                          "ssl.keymanager.algorithm": "SunX509"})
    assert p.kafka_python("admin") == {"client_id": "ops", "request_timeout_ms": 15000}
    assert p.kafka_python("producer") == {"client_id": "ops", "request_timeout_ms": 15000, "acks": "all"}
    assert p.kafka_python("consumer") == {"client_id": "ops", "request_timeout_ms": 15000,
                                          "isolation_level": "read_committed"}
    assert p.librdkafka() == {"client.id": "ops", "request.timeout.ms": "15000", "acks": "all",
                              "isolation.level": "read_committed"}


def test_tls_from_a_pem_truststore_and_pkcs12_keystore(certs: tuple[CertificateAuthority, Identity]) -> None:
    ca, client = certs
    p = ClientProperties({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                          "ssl.truststore.location": str(ca.ca_file()), "ssl.keystore.type": "PKCS12",
                          "ssl.keystore.location": str(client.pkcs12_file()), "ssl.keystore.password": PASSWORD})
    settings = p.kafka_python("consumer")
    ctx = settings["ssl_context"]
    assert settings["security_protocol"] == "SSL" and isinstance(ctx, ssl.SSLContext)
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("countryName", "US"),), (("organizationName", "Odradek Tests"),),
                                                          (("commonName", "Odradek Test CA"),))]
    assert ctx.maximum_version == ssl.TLSVersion.MAXIMUM_SUPPORTED or ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    rd = p.librdkafka()
    assert rd["security.protocol"] == "ssl" and rd["ssl.endpoint.identification.algorithm"] == "https"
    assert rd["ssl.ca.pem"] == ca.cert_pem
    assert rd["ssl.certificate.pem"].startswith(client.cert_pem) and "PRIVATE KEY" in rd["ssl.key.pem"]


def test_tls_knobs(certs: tuple[CertificateAuthority, Identity]) -> None:
    ca, client = certs
    p = ClientProperties({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                          "ssl.truststore.certificates": ca.cert_pem, "ssl.endpoint.identification.algorithm": "",
                          "ssl.keystore.type": "PEM",
                          "ssl.keystore.certificate.chain": client.cert_pem, "ssl.keystore.key": client.key_pem(PASSWORD),
                          "ssl.key.password": PASSWORD})
    ctx = p.ssl_context()
    assert ctx is not None and not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert p.librdkafka()["ssl.endpoint.identification.algorithm"] == "none"
    tls12 = ClientProperties({**p.values, "ssl.protocol": "TLSv1.2"})
    assert tls12.ssl_context().maximum_version == ssl.TLSVersion.TLSv1_2  # type: ignore[union-attr]
    with pytest.raises(ClientConfigError, match=r"ssl.protocol"):
        tls12.librdkafka()
    with pytest.raises(ClientConfigError, match=r"ssl.enabled.protocols"):
        ClientProperties({**p.values, "ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": "TLSv1.3"}).librdkafka()
    with pytest.raises(ClientConfigError, match=r"ssl.protocol: TLSv1.2 is below"):
        ClientProperties({**tls12.values, "ssl.enabled.protocols": "TLSv1.3"})
    with pytest.raises(ClientConfigError, match=r"ssl.key.password"):
        ClientProperties({**p.values, "ssl.key.password": "wrong"})


def test_jks_stores_are_refused_naming_pkcs12_and_pem(tmp_path: Path) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    with pytest.raises(ClientConfigError, match=r"JKS.*PKCS12.*PEM"):
        ClientProperties({"security.protocol": "SSL", "ssl.truststore.location": str(jks),
                          "ssl.truststore.password": "x"})


def test_the_tls_context_pickles_as_its_properties(certs: tuple[CertificateAuthority, Identity]) -> None:
    """Spark ships a source's settings to executors: the context is rebuilt there."""
    ca, _ = certs
    ctx = ClientProperties({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                            "ssl.truststore.location": str(ca.ca_file()), "ssl.protocol": "TLSv1.2"}).ssl_context()
    again = pickle.loads(pickle.dumps(ctx))
    assert isinstance(again, ssl.SSLContext) and again is not ctx
    assert again.maximum_version == ssl.TLSVersion.TLSv1_2 and len(again.get_ca_certs()) == 1


def test_a_command_config_file(tmp_path: Path, certs: tuple[CertificateAuthority, Identity]) -> None:
    ca, _ = certs
    path = tmp_path / "client.properties"
    path.write_bytes(("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                      f"sasl.jaas.config={SCRAM} required \\\n   username=\"alice\" password=\"caf\\u00e9\";\n"
                      f"ssl.truststore.type=PEM\nssl.truststore.location={ca.ca_file()}\n"
                      "ssl.endpoint.identification.algorithm=\nclient.id=ops\n").encode("latin-1"))
    settings = read_command_config(path).kafka_python("producer")
    assert settings["sasl_plain_password"] == "café" and settings["client_id"] == "ops"
    assert settings["security_protocol"] == "SASL_SSL" and not settings["ssl_context"].check_hostname


def test_spark_kafka_options_take_javas_security_keys(certs: tuple[CertificateAuthority, Identity]) -> None:
    """One set of options for Spark's kafka source and the odradek source."""
    ca, _ = certs
    config = kafka_client_config({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="alice" password="s";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_file()), "fetch.max.bytes": "1024"},
        "consumer")
    assert {k: v for k, v in config.items() if k != "ssl_context"} == {
        "fetch_max_bytes": 1024, "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice", "sasl_plain_password": "s"}
    assert pickle.loads(pickle.dumps(config["ssl_context"])).get_ca_certs()
    with pytest.raises(OptionError, match=r"option 'kafka.sasl.mechanism': unset, so Kafka's default GSSAPI"):
        kafka_client_config({"security.protocol": "SASL_SSL", "ssl.truststore.location": str(ca.ca_file()),
                             "ssl.truststore.type": "PEM"}, "producer")
