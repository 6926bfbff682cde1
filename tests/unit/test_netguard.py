"""Unit tests for the outbound address policy (netguard)."""

from __future__ import annotations

import ipaddress

import pytest

from agent_core.tools.base import ToolFailure
from agent_core.tools.netguard import is_blocked_ip, normalize_host, parse_host_ip, resolve_checked

BLOCKED = [
    "127.0.0.1",
    "127.255.255.254",
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "100.64.0.1",
    "100.100.100.200",
    "169.254.169.254",
    "169.254.1.1",
    "0.0.0.0",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd00:ec2::254",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::7f00:1",
    "2002:7f00:1::",
    "2002:a9fe:a9fe::",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::1",
]
PUBLIC = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "2606:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:93.184.216.34",
    "64:ff9b::5db8:d822",
    "2002:5db8:d822::",
]


@pytest.mark.parametrize("address", BLOCKED)
def test_blocked_addresses(address: str) -> None:
    """Loopback, private, link-local, metadata and embedded-IPv4 forms are refused."""
    assert is_blocked_ip(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    """Ordinary public addresses (and their mapped / NAT64 / 6to4 forms) are allowed."""
    assert not is_blocked_ip(ipaddress.ip_address(address))


def test_scoped_link_local_is_blocked() -> None:
    """A zone id does not hide a link-local address."""
    assert is_blocked_ip(ipaddress.IPv6Address("fe80::1%eth0"))


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1.2", "10.1.0.2"),
        ("169.254.43518", "169.254.169.254"),
        ("127.0.0.1.", "127.0.0.1"),
        ("１２７.０.０.１", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("[::ffff:7f00:1]", "::ffff:7f00:1"),
        ("[64:ff9b::7f00:1]", "64:ff9b::7f00:1"),
    ],
)
def test_parse_host_ip_notations(host: str, expected: str) -> None:
    """Every resolver notation of an IP literal is recognised."""
    assert parse_host_ip(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize("host", ["fe80::1%eth0", "[fe80::1%25eth0]"])
def test_parse_host_ip_zone_id(host: str) -> None:
    """IPv6 literals with a zone id (raw or URL-encoded) parse to the scoped address."""
    ip = parse_host_ip(host)
    assert isinstance(ip, ipaddress.IPv6Address)
    assert ip.scope_id == "eth0"
    assert is_blocked_ip(ip)


@pytest.mark.parametrize(
    "host", ["example.com", "localhost", "1.2.3.4.5", "256.1.1.1", "08.1.1.1", "0xg1", "a.0x7f", "", "[]"]
)
def test_parse_host_ip_non_literals(host: str) -> None:
    """Names and malformed numbers are not IP literals."""
    assert parse_host_ip(host) is None


def test_normalize_host() -> None:
    """Allow-list comparison ignores case, brackets and one trailing dot."""
    assert normalize_host("Example.COM.") == "example.com"
    assert normalize_host("[::1]") == "::1"


@pytest.mark.parametrize("host", ["127.0.0.1", "0x7f000001", "127.1", "[::1]", "localhost", "LOCALHOST."])
def test_resolve_checked_refuses_loopback(host: str) -> None:
    """Literals and names resolving to loopback are denied with blocked_address."""
    with pytest.raises(ToolFailure) as info:
        resolve_checked(host, 80, [])
    assert (info.value.status, info.value.reason) == ("denied", "blocked_address")


def test_resolve_checked_public_literal() -> None:
    """A public literal is returned as-is without any DNS lookup."""
    assert resolve_checked("93.184.216.34", 80, []) == [ipaddress.ip_address("93.184.216.34")]


def test_resolve_checked_allow_list_bypass() -> None:
    """Allow-listed hosts skip the address check; other spellings of the same IP do not."""
    assert resolve_checked("127.0.0.1", 80, ["127.0.0.1"]) == [ipaddress.ip_address("127.0.0.1")]
    assert ipaddress.ip_address("127.0.0.1") in resolve_checked("LocalHost.", 80, ["localhost"])
    with pytest.raises(ToolFailure) as info:
        resolve_checked("0x7f000001", 80, ["127.0.0.1"])
    assert info.value.reason == "blocked_address"


def test_resolve_checked_unresolvable() -> None:
    """A name that cannot be resolved is a fetch failure, not a denial."""
    with pytest.raises(ToolFailure) as info:
        resolve_checked("no-such-host.invalid", 80, [])
    assert (info.value.status, info.value.reason) == ("error", "fetch_failed")
