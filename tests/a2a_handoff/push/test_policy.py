"""The SSRF guard: which webhook URLs are accepted, by default and with an allowlist."""

from __future__ import annotations

import ipaddress

import pytest

from a2a_handoff.push import PushPolicy, PushRefused

pytestmark = pytest.mark.anyio

REFUSED_BY_DEFAULT = [
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.0.1/",
    "https://127.0.0.1/",
    "https://127.9.9.9/",
    "https://0.0.0.0/",
    "https://169.254.169.254/",
    "https://100.64.1.1/",
    "https://224.0.0.251/",
    "https://255.255.255.255/",
    "https://[::1]/",
    "https://[fe80::1]/",
    "https://[fc00::1]/",
    "https://[ff02::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::]/",
    "https://localhost/",
    "https://api.localhost/",
    "http://93.184.215.14/",
    "https://user:pw@93.184.215.14/",
    "ftp://93.184.215.14/",
    "https:///nohost",
    "https://93.184.215.14:99999/",
    "https://a b/",
    "",
]


@pytest.mark.parametrize("url", REFUSED_BY_DEFAULT)
async def test_private_loopback_and_malformed_urls_are_refused_by_default(url: str) -> None:
    with pytest.raises(PushRefused):
        await PushPolicy().resolve(url)


async def test_a_public_https_address_is_accepted() -> None:
    assert await PushPolicy().resolve("https://93.184.215.14/hook") == [
        ipaddress.ip_address("93.184.215.14")
    ]
    assert await PushPolicy().resolve("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/h")


async def test_a_name_resolving_to_a_private_address_is_refused_unless_listed() -> None:
    policy = PushPolicy()
    with pytest.raises(PushRefused, match="not a public address"):
        policy.check_addresses("hooks.internal", [ipaddress.ip_address("10.1.2.3")])
    with pytest.raises(PushRefused):  # one private address among public ones is enough
        policy.check_addresses(
            "mixed.example", [ipaddress.ip_address("8.8.8.8"), ipaddress.ip_address("10.0.0.1")]
        )
    listed = PushPolicy.of(["hooks.internal"])
    assert listed.check_addresses("hooks.internal", [ipaddress.ip_address("10.1.2.3")])


async def test_the_allowlist_admits_listed_hosts_and_networks_over_http_too() -> None:
    policy = PushPolicy.of(["127.0.0.1,10.0.0.0/8", "localhost"])
    assert await policy.resolve("http://127.0.0.1:8080/hook")
    assert await policy.resolve("https://10.20.30.40/hook")
    assert await policy.resolve("http://localhost:9/hook")
    for url in ("https://192.168.1.1/", "https://[::1]/", "http://127.0.0.2/"):
        with pytest.raises(PushRefused):
            await policy.resolve(url)


async def test_an_unresolvable_name_is_accepted_only_when_asked() -> None:
    policy = PushPolicy()
    assert await policy.resolve("https://no-such-host.invalid/", unresolved_ok=True) == []
    with pytest.raises(Exception, match="does not resolve"):
        await policy.resolve("https://no-such-host.invalid/")


def test_a_bad_allowlist_entry_is_refused() -> None:
    for entry in ("https://x/", "a b", "10.0.0.0/99"):
        with pytest.raises(ValueError, match="push allowlist entry"):
            PushPolicy.of([entry])


async def test_an_ipv6_form_is_judged_by_the_ipv4_address_it_embeds() -> None:
    policy = PushPolicy()
    with pytest.raises(PushRefused, match=r"reaches 169\.254\.169\.254: link-local"):
        await policy.resolve("https://[64:ff9b::a9fe:a9fe]/latest")
    for url in ("https://[2002:a00:1::1]/", "https://[::ffff:0:7f00:1]/", "https://[::a00:1]/"):
        with pytest.raises(PushRefused, match="not a public address"):
            await policy.resolve(url)
    assert await policy.resolve("https://[64:ff9b::808:808]/hook")
    assert await policy.resolve("https://[2002:808:808::1]/hook")


async def test_the_allowlist_admits_an_ipv6_form_of_a_listed_address() -> None:
    policy = PushPolicy.of(["10.0.0.0/8,127.0.0.1"])
    for url in (
        "https://[64:ff9b::a00:1]/",
        "http://[::ffff:10.1.2.3]/",
        "https://[2002:a00:1::1]/",
        "http://[::ffff:127.0.0.1]/",
        "https://[::7f00:1]/",
        "https://[::ffff:0:a00:1]/",
        "https://[2001:0:a00:1::f7f7:f7f7]/",  # Teredo: server 10.0.0.1 listed, client 8.8.8.8
    ):
        assert await policy.resolve(url), url
    for url in (
        "https://[2001:0:a00:1::3f57:fefe]/",  # Teredo: client 192.168.1.1, neither
        "https://[64:ff9b::c0a8:101]/",
        "https://[::1]/",
        "http://[64:ff9b::808:808]/",
    ):
        with pytest.raises(PushRefused):
            await policy.resolve(url)
    nat64 = PushPolicy.of(["64:ff9b::/96"])  # an IPv6 network: whatever its forms embed
    assert await nat64.resolve("https://[64:ff9b::a9fe:a9fe]/")
