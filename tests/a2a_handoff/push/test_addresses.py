"""Which addresses are public: the IANA tables, and every IPv6 form embedding an IPv4 address
judged by the address it embeds (the forms are built here from their RFCs, independently)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from a2a_handoff.push.addresses import NOT_PUBLIC, is_public, not_public, reaches

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address


def rfc6052(prefix: str, length: int, v4: V4) -> V6:
    """`v4` embedded after a NAT64 prefix of `length` bits (RFC 6052 §2.2: skip octet 8)."""
    octets = list(V6(prefix).packed[: length // 8])
    for octet in v4.packed:
        if len(octets) == 8:
            octets.append(0)  # the "u" octet
        octets.append(octet)
    return V6(bytes(octets + [0] * (16 - len(octets))))


def teredo(server: V4, client: V4) -> V6:
    """RFC 4380 §4: 2001:0000, the server, flags and port, the client's bits inverted."""
    hidden = bytes(b ^ 0xFF for b in client.packed)
    return V6(bytes.fromhex("20010000") + server.packed + bytes.fromhex("8000f227") + hidden)


FORMS: dict[str, Callable[[V4], V6]] = {
    "nat64": lambda v4: rfc6052("64:ff9b::", 96, v4),
    "nat64-local/48": lambda v4: rfc6052("64:ff9b:1::", 48, v4),
    "nat64-local/56": lambda v4: rfc6052("64:ff9b:1:ab00::", 56, v4),
    "nat64-local/64": lambda v4: rfc6052("64:ff9b:1:abcd::", 64, v4),
    "nat64-local/96": lambda v4: rfc6052("64:ff9b:1::", 96, v4),
    "6to4": lambda v4: V6(b"\x20\x02" + v4.packed + bytes(10)),
    "teredo-server": lambda v4: teredo(v4, V4("8.8.8.8")),
    "teredo-client": lambda v4: teredo(V4("8.8.8.8"), v4),
    "ipv4-compatible": lambda v4: V6(bytes(12) + v4.packed),
    "ipv4-mapped": lambda v4: V6(bytes(10) + b"\xff\xff" + v4.packed),
    "siit-translated": lambda v4: V6(bytes(8) + b"\xff\xff\x00\x00" + v4.packed),
}

NOT_PUBLIC_V4 = [
    "169.254.169.254",
    "10.0.0.1",
    "127.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "240.0.0.1",
    "198.18.0.1",
    "192.0.2.1",
    "192.0.0.9",
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("inner", NOT_PUBLIC_V4)
def test_a_form_embedding_a_non_public_address_is_not_public(form: str, inner: str) -> None:
    address = FORMS[form](V4(inner))
    assert not is_public(address)
    if int(address) > 1:  # (`::` and `::1` are the unspecified and loopback addresses)
        assert V4(inner) in reaches(address)
        named = inner if not form.startswith("nat64-local") else ""  # (another may be first)
        assert (not_public(address) or "").startswith(f"reaches {named}")


@pytest.mark.parametrize("form", [f for f in FORMS if not f.startswith("nat64-local")])
@pytest.mark.parametrize("inner", ["8.8.8.8", "1.1.1.1", "93.184.215.14"])
def test_a_form_embedding_a_public_address_is_public(form: str, inner: str) -> None:
    address = FORMS[form](V4(inner))
    assert set(reaches(address)) <= {V4(inner), V4("8.8.8.8")}
    assert is_public(address), (address, not_public(address))


def test_teredo_is_judged_by_its_server_and_its_client() -> None:
    example = V6("2001:0:4136:e378:8000:63bf:3fff:fdd2")  # RFC 4380 §4's (client 192.0.2.45)
    assert reaches(example) == (V4("65.54.227.120"), V4("192.0.2.45"))
    assert not_public(example) == "reaches 192.0.2.45: documentation (TEST-NET-1)"
    assert reaches(teredo(V4("10.0.0.1"), V4("8.8.8.8"))) == (V4("10.0.0.1"), V4("8.8.8.8"))
    assert is_public(teredo(V4("65.54.227.120"), V4("8.8.8.8")))


def test_a_local_use_nat64_address_is_judged_at_every_place_a_prefix_may_put_it() -> None:
    # The translator's prefix inside 64:ff9b:1::/48 is /48, /56, /64 or /96: unknown here,
    # so a tail public at /96 does not hide 169.254.169.254 read at /48.
    hiding = V6(int(rfc6052("64:ff9b:1::", 48, V4("169.254.169.254"))) | int(V4("8.8.8.8")))
    assert V4("8.8.8.8") in reaches(hiding)
    assert not is_public(hiding)
    everywhere = V6("64:ff9b:1:808:8:808:808:808")  # 8.8.8.8 read at each place
    assert reaches(everywhere) == (V4("8.8.8.8"),)
    assert is_public(everywhere), not_public(everywhere)
    assert not is_public(rfc6052("64:ff9b:1::", 96, V4("8.8.8.8")))  # 0.0.0.0 at /48


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("::2", "reaches 0.0.0.2: 'this network'"),
        ("64:ff9b::", "reaches 0.0.0.0: 'this network'"),
        ("::ffff:0.0.0.0", "reaches 0.0.0.0: 'this network'"),
        ("64:ff9b::a9fe:a9fe", "reaches 169.254.169.254: link-local (cloud metadata)"),
        ("64:ff9b::8.8.8.8", None),
        ("::ffff:8.8.8.8", None),
        ("2002:808:808::1", None),
        ("fe80::1", "link-local"),
        ("fd00::1", "unique-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("100::1", "discard-only"),
        ("4000::1", "reserved (not global unicast)"),
        ("2606:4700:4700::1111", None),
        ("2001:4860:4860::8888", None),
        ("8.8.8.8", None),
        ("10.1.2.3", "private-use"),
    ],
)
def test_edge_cases(address: str, why: str | None) -> None:
    assert not_public(ipaddress.ip_address(address)) == why


# Where Python's `is_global`/`is_private` answer differently between 3.11, 3.12 and 3.13: the
# classification here is its own table, so it answers these alike on every version.
VERSIONS_DISAGREE = [
    ("192.0.0.9", False),
    ("192.0.0.10", False),
    ("100.64.0.1", False),
    ("192.88.99.1", False),
    ("2001:1::1", False),
    ("2001:3::1", False),
    ("2001:20::1", False),
    ("2002:a00:1::1", False),
    ("64:ff9b:1::1", False),
    ("::ffff:0:a00:1", False),
    ("5f00::1", False),
    ("3fff::1", False),
    ("192.31.196.1", True),
    ("2620:4f:8000::1", True),
    ("64:ff9b::808:808", True),
]


@pytest.mark.parametrize(("address", "public"), VERSIONS_DISAGREE)
def test_the_answer_is_the_tables_not_the_python_versions(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


# The IANA IPv4 and IPv6 Special-Purpose Address Registries' entries not globally reachable
# (and multicast), copied here from the registries rather than from the module.
IANA_NOT_GLOBAL = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.0.0/29",
    "192.0.0.8/32",
    "192.0.0.170/31",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "240.0.0.0/4",
    "255.255.255.255/32",
    "224.0.0.0/4",
    "::1/128",
    "::/128",
    "100::/64",
    "100:0:0:1::/64",
    "2001:2::/48",
    "2001:10::/28",
    "2001:db8::/32",
    "3fff::/20",
    "5f00::/16",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
]


@pytest.mark.parametrize("network", IANA_NOT_GLOBAL)
def test_every_registry_entry_not_globally_reachable_is_not_public(network: str) -> None:
    net = ipaddress.ip_network(network)
    for address in (net[0], net[-1], net[net.num_addresses // 2]):
        assert not is_public(address), address


@pytest.mark.parametrize(("network", "what"), NOT_PUBLIC, ids=lambda n: str(n))
def test_every_table_entry_is_not_public_at_both_ends(
    network: ipaddress.IPv4Network | ipaddress.IPv6Network, what: str
) -> None:
    for address in (network[0], network[-1]):
        assert not is_public(address), (address, what)
