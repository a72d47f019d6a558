"""TLS settings (`TlsConfig`), the contexts made of them (`server.tls`), and who calls under
mutual TLS (`server._authentication`): a key in the request decides, else the certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from a2a_handoff import ApiKeyAuth, build_card, create_app, open_store
from a2a_handoff.errors import ConfigError
from a2a_handoff.secrets import SecretError
from a2a_handoff.server import TlsConfig, client_context, uvicorn_options
from a2a_handoff.server._authentication import Authentication
from servers.echo import EchoAgent
from tests.tls_support import TestCA

KEYS = ApiKeyAuth.from_keys({"carol": "k-carol"})
PEER = "spiffe://example.org/user/alice"


def test_a_tls_config_is_checked_when_made() -> None:
    with pytest.raises(ConfigError, match="cert and key go together"):
        TlsConfig(cert="agent.pem")
    with pytest.raises(ConfigError, match="client_cert and client_key go together"):
        TlsConfig(client_key="client.key")
    with pytest.raises(ConfigError, match=r"client_ca \(mutual TLS\) needs the agent.s own cert"):
        TlsConfig(client_ca="ca.pem")
    with pytest.raises(ConfigError, match="path of a PEM file"):
        TlsConfig(ca=42)  # type: ignore[arg-type]
    served = TlsConfig(cert="a.pem", key="a.key", client_ca="ca.pem")
    assert (served.serves, served.mutual, served.presented) == (True, True, ("a.pem", "a.key"))
    calling = TlsConfig(client_cert="c.pem", client_key="c.key", ca="ca.pem")
    assert (calling.serves, calling.presented) == (False, ("c.pem", "c.key"))


def test_a_key_in_the_request_decides_else_the_certificate() -> None:
    both = Authentication(KEYS, certificates=True)
    assert both.authenticate({"x-api-key": "k-carol"}, PEER) == "carol"
    assert both.authenticate({"authorization": "Bearer k-carol"}, PEER) == "carol"
    assert both.authenticate({"x-api-key": "wrong"}, PEER) is None  # not the certificate's
    assert both.authenticate({"authorization": "Bearer wrong"}, PEER) is None
    assert both.authenticate({}, PEER) == PEER
    assert both.authenticate({"authorization": "Basic eA=="}, PEER) == PEER  # no key
    assert both.authenticate({}, None) is None
    keys_only = Authentication(KEYS)  # a certificate counts only under mutual TLS
    assert keys_only.authenticate({}, PEER) is None
    assert Authentication.of(None, mutual_tls=False) is None
    certificates = Authentication.of(None, mutual_tls=True)
    assert certificates is not None
    assert certificates.authenticate({"x-api-key": "k-carol"}, PEER) == PEER  # no keys here


def test_the_card_declares_mutual_tls_and_needs_https(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    own = ca.issue("echo", uris=("spiffe://example.org/agent/echo",))
    tls = TlsConfig(cert=own.cert, key=own.key, client_ca=ca.cert)
    card = build_card("echo", "https://127.0.0.1:8443/")
    app = create_app(EchoAgent(), card, open_store("memory://"), tls=tls)
    served = app.state.a2a.card.model_dump(by_alias=True, exclude_none=True)
    assert list(served["securitySchemes"]) == ["mutualTLS"]
    assert "mtlsSecurityScheme" in served["securitySchemes"]["mutualTLS"]
    assert served["securityRequirements"] == [{"schemes": {"mutualTLS": {"list": []}}}]
    plain = build_card("echo", "http://127.0.0.1:8443/")
    with pytest.raises(ConfigError, match="give it https:// URLs"):
        create_app(EchoAgent(), plain, open_store("memory://"), tls=tls)


def test_the_contexts_require_a_client_certificate_and_a_private_key(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    own = ca.issue("echo")
    options = uvicorn_options(TlsConfig(cert=own.cert, key=own.key, client_ca=ca.cert))
    context = options["ssl_context_factory"](None, None)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    plain = uvicorn_options(TlsConfig(cert=own.cert, key=own.key))["ssl_context_factory"](0, 0)
    assert plain.verify_mode == ssl.CERT_NONE  # HTTPS only: no certificate asked for
    outbound = client_context(TlsConfig(ca=ca.cert))
    assert outbound.verify_mode == ssl.CERT_REQUIRED
    assert outbound.check_hostname
    own.key.chmod(0o640)
    with pytest.raises(SecretError, match="is readable by other users"):
        uvicorn_options(TlsConfig(cert=own.cert, key=own.key))
    with pytest.raises(SecretError, match="is readable by other users"):
        client_context(TlsConfig(client_cert=own.cert, client_key=own.key))
    own.key.chmod(0o600)
    with pytest.raises(ConfigError, match="cannot load"):
        uvicorn_options(TlsConfig(cert=ca.cert, key=own.key))  # not the key's certificate
