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

pytestmark = pytest.mark.anyio
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


async def test_a_key_in_the_request_decides_else_the_certificate() -> None:
    both = Authentication(KEYS, None, certificates=True)
    assert await both.authenticate({"x-api-key": "k-carol"}, PEER) == "carol"
    assert await both.authenticate({"authorization": "Bearer k-carol"}, PEER) == "carol"
    assert await both.authenticate({"x-api-key": "wrong"}, PEER) is None  # not the peer's
    assert await both.authenticate({"authorization": "Bearer wrong"}, PEER) is None
    assert await both.authenticate({}, PEER) == PEER
    assert await both.authenticate({"authorization": "Basic eA=="}, PEER) == PEER  # no key
    assert await both.authenticate({}, None) is None
    assert both.recognised({}, PEER) == PEER  # known without waiting, as a key is
    assert both.recognised({"x-api-key": "wrong"}, PEER) is None
    keys_only = Authentication(KEYS, None)  # a certificate counts only under mutual TLS
    assert await keys_only.authenticate({}, PEER) is None
    assert keys_only.recognised({}, PEER) is None
    certificates = Authentication(None, None, certificates=True)
    assert await certificates.authenticate({}, PEER) == PEER
    assert await certificates.authenticate({"x-api-key": "k-carol"}, PEER) is None  # no keys


async def test_a_certificate_naming_an_api_keys_name_is_refused() -> None:
    """A CA's subject never becomes a key holder: a certificate whose principal is a key's
    name ("carol") is refused, its key still works."""
    both = Authentication(KEYS, None, certificates=True)
    assert await both.authenticate({}, "carol") is None
    assert both.recognised({}, "carol") is None
    assert await both.authenticate({"x-api-key": "k-carol"}, "carol") == "carol"


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


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """A TLS handshake between the two contexts, in memory; raises ssl.SSLError on refusal
    (on TLS 1.3 the server's verdict on the client's certificate comes after the client's
    side is done: one read of the server's answer says it)."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(to_server, to_client, server_side=True)
    c = client.wrap_bio(to_client, to_server, server_hostname="127.0.0.1")
    done = {"c": False, "s": False}
    for _ in range(10):
        for name, side in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
    s.write(b"x")
    assert c.read(1) == b"x"


def test_only_the_configured_cas_are_trusted_never_the_systems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: a CA the system trusts (here made so by $SSL_CERT_FILE, as a public CA is
    by the distribution's bundle) signs a certificate naming an operator. Neither the agent's
    server (mutual TLS) nor its calls (`ca`) may trust it: only the configured CAs."""
    ours, system = TestCA(tmp_path / "ours"), TestCA(tmp_path / "system", "a public CA")
    monkeypatch.setenv("SSL_CERT_FILE", str(system.cert))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "none"))
    agent = ours.issue("agent")
    options = uvicorn_options(TlsConfig(cert=agent.cert, key=agent.key, client_ca=ours.cert))
    server = options["ssl_context_factory"](None, None)
    impostor = system.issue("olga", uris=("spiffe://example.org/ops/olga",))
    presenting = ssl.create_default_context(cafile=str(ours.cert))
    presenting.load_cert_chain(impostor.cert, impostor.key)
    with pytest.raises(ssl.SSLError):
        handshake(server, presenting)
    rightful = ours.issue("alice", uris=("spiffe://example.org/user/alice",))
    presenting = ssl.create_default_context(cafile=str(ours.cert))
    presenting.load_cert_chain(rightful.cert, rightful.key)
    handshake(server, presenting)  # the configured CA's certificate passes
    # Calling out: a peer serving a certificate from the system's CA is not trusted.
    peer = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    peer.load_cert_chain(impostor.cert, impostor.key)
    with pytest.raises(ssl.SSLError):
        handshake(peer, client_context(TlsConfig(ca=ours.cert)))
    trusted_peer = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    trusted_peer.load_cert_chain(agent.cert, agent.key)
    handshake(trusted_peer, client_context(TlsConfig(ca=ours.cert)))
