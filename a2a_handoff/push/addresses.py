"""Which addresses are public: an address is judged by what a connection to it reaches.

An IPv6 address that embeds an IPv4 address is judged by the IPv4 address it embeds, as a
translator or tunnel would deliver it there: NAT64 (`64:ff9b::/96`, and the local-use
`64:ff9b:1::/48`), 6to4 (`2002::/16`), Teredo (`2001::/32`), IPv4-compatible (`::/96`),
IPv4-mapped (`::ffff:0:0/96`) and SIIT IPv4-translated (`::ffff:0:0:0/96`). Such a form is
public only when every address it may reach is: a Teredo address when both its server and its
(obfuscated) client are; a local-use NAT64 address when the IPv4 address read at each place
RFC 6052 lets a translator's prefix inside `64:ff9b:1::/48` put it (/48, /56, /64, /96) is —
the prefix length is the network's own choice, unknown here. `::` and `::1` are the
unspecified and loopback addresses, not IPv4-compatible ones.

Every other address is public unless it lies in a network of `NOT_PUBLIC`, written out from
the IANA IPv4 and IPv6 Special-Purpose Address Registries (the entries not globally
reachable) and the address space registries (multicast, reserved), rather than taken from
`ipaddress`' `is_global`/`is_private`, whose answers differ between Python versions. It is
stricter than the registries in two places: the whole of the IETF protocol assignments
blocks (192.0.0.0/24, 2001::/23) is refused, their few anycast and relay ranges being no
place for a webhook, and so is IPv6 outside global unicast (2000::/3).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Networks an outgoing call must not reach unless an operator admits them, with what each is.
# The first that holds an address names it, so a specific entry stands before a wider one.
NOT_PUBLIC: tuple[tuple[Network, str], ...] = (
    (_V4("0.0.0.0/8"), "'this network'"),
    (_V4("10.0.0.0/8"), "private-use"),
    (_V4("100.64.0.0/10"), "shared address space (CGNAT)"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local (cloud metadata)"),
    (_V4("172.16.0.0/12"), "private-use"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments"),
    (_V4("192.0.2.0/24"), "documentation (TEST-NET-1)"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast (deprecated)"),
    (_V4("192.168.0.0/16"), "private-use"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation (TEST-NET-2)"),
    (_V4("203.0.113.0/24"), "documentation (TEST-NET-3)"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("255.255.255.255/32"), "limited broadcast"),
    (_V4("240.0.0.0/4"), "reserved"),
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("100::/64"), "discard-only"),
    (_V6("100:0:0:1::/64"), "dummy prefix"),
    (_V6("2001::/23"), "IETF protocol assignments"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("3fff::/20"), "documentation"),
    (_V6("5f00::/16"), "segment routing (SRv6) SIDs"),
    (_V6("fc00::/7"), "unique-local"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local (deprecated)"),
    (_V6("ff00::/8"), "multicast"),
    (_V6("::/3"), "reserved (not global unicast)"),
    (_V6("4000::/2"), "reserved (not global unicast)"),
    (_V6("8000::/1"), "reserved (not global unicast)"),
)

# The forms whose last 32 bits are the IPv4 address: NAT64 (RFC 6052), IPv4-mapped and
# IPv4-compatible (RFC 4291), SIIT IPv4-translated (RFC 2765).
_LAST_32 = (_V6("64:ff9b::/96"), _V6("::ffff:0:0/96"), _V6("::ffff:0:0:0/96"), _V6("::/96"))
_NAT64_LOCAL = _V6("64:ff9b:1::/48")  # RFC 8215
_SIXTOFOUR = _V6("2002::/16")  # RFC 3056: the address in bits 16-47
_TEREDO = _V6("2001::/32")  # RFC 4380: the server in bits 32-63, the client inverted at the end


def _v4(value: int) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(value & 0xFFFFFFFF)


def _local_nat64(value: int) -> Iterator[ipaddress.IPv4Address]:
    # RFC 6052 §2.2: the address follows the prefix, skipping bits 64-71 (the "u" octet).
    for prefix in (48, 56, 64):
        after = (value >> (88 - prefix)) & (1 << 40) - 1  # 40 bits: the address and "u"
        low_bits = prefix - 32  # the address's bits after the "u" octet: 16, 24, 32
        yield _v4((after >> (low_bits + 8)) << low_bits | after & (1 << low_bits) - 1)
    yield _v4(value)  # /96: the last 32 bits


def reaches(address: Address) -> tuple[Address, ...]:
    """The addresses a connection to `address` may end at: the IPv4 addresses an IPv6 form
    embeds (several for Teredo and local-use NAT64), else `address` itself."""
    if isinstance(address, ipaddress.IPv4Address):
        return (address,)
    value = int(address)
    if value <= 1:  # `::` and `::1`: unspecified and loopback, not IPv4-compatible
        return (address,)
    if any(address in form for form in _LAST_32):
        return (_v4(value),)
    if address in _NAT64_LOCAL:
        return tuple(dict.fromkeys(_local_nat64(value)))
    if address in _SIXTOFOUR:
        return (_v4(value >> 80),)
    if address in _TEREDO:  # the server, then the client
        return tuple(dict.fromkeys((_v4(value >> 64), _v4(~value))))
    return (address,)


def _table(address: Address) -> str | None:
    for network, what in NOT_PUBLIC:
        if address.version == network.version and address in network:
            return what
    return None


def not_public(address: Address) -> str | None:
    """Why `address` is not public (`'loopback'`, `'reaches 10.0.0.1: private-use'`), or
    None when every address it reaches is public."""
    for reached in reaches(address):
        what = _table(reached)
        if what is not None:
            return what if reached == address else f"reaches {reached}: {what}"
    return None


def is_public(address: Address) -> bool:
    """Whether every address a connection to `address` may reach is public."""
    return not_public(address) is None
