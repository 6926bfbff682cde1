"""Outbound address policy: refuse loopback, private, link-local and metadata targets (SSRF guard)."""

from __future__ import annotations

import ipaddress
import socket
from typing import TypeAlias
from urllib.parse import unquote

from agent_core.tools.base import ToolFailure

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

# What `is_global` (and the multicast, reserved and site-local flags) leave out: the IETF protocol
# assignments block (Python counts only parts of it) and the local-use NAT64 prefix (newer Pythons count it).
_ALSO_BLOCKED: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
    ipaddress.ip_network("192.0.0.0/24"),
    ipaddress.ip_network("64:ff9b:1::/48"),
)
# Cloud instance metadata endpoints (all also non-global; named so that stays true whatever Python says).
_METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),
        ipaddress.ip_address("100.100.100.200"),
        ipaddress.ip_address("fd00:ec2::254"),
    }
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a mapped, 6to4 or NAT64 IPv6 address reaches, if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_blocked_ip(ip: IPAddress) -> bool:
    """True when an outbound connection to ``ip`` must be refused: anything not globally reachable."""
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ipaddress.IPv6Address(int(ip))  # without a zone id
        if ip in _IPV4_COMPATIBLE:  # deprecated IPv4-compatible forms, `::` and `::1`: never a public target
            return True
        embedded = _embedded_ipv4(ip)
        if embedded is not None:  # judged by the IPv4 address it carries
            return is_blocked_ip(embedded)
        if ip.is_site_local:
            return True
    if ip in _METADATA_ADDRESSES or any(ip in net for net in _ALSO_BLOCKED):
        return True
    return not ip.is_global or ip.is_multicast or ip.is_reserved


def _parse_ipv4_part(part: str) -> int | None:
    """One inet_aton component: 0x-prefixed hex, 0-prefixed octal or decimal."""
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
        valid = all(c in "0123456789abcdefABCDEF" for c in digits)
    elif len(part) > 1 and part[0] == "0":
        digits, base = part[1:], 8
        valid = all(c in "01234567" for c in digits)
    else:
        digits, base = part, 10
        valid = bool(digits) and all(c in "0123456789" for c in digits)
    if not valid:
        return None
    return int(digits, base) if digits else 0


def _parse_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """Parse IPv4 the way the C resolver's inet_aton does (1 to 4 parts, any base)."""
    text = text.split(None, 1)[0] if text.strip() else ""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or any(not p for p in parts):
        return None
    values = [_parse_ipv4_part(p) for p in parts]
    if any(v is None for v in values):
        return None
    nums = [v for v in values if v is not None]
    *head, last = nums
    if any(v > 0xFF for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = last
    for index, byte in enumerate(head):
        value |= byte << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _parse_ipv6(text: str) -> ipaddress.IPv6Address | None:
    """Parse an IPv6 literal, with an optional (possibly %25-encoded) zone id."""
    address, sep, zone = text.partition("%")
    zone = unquote("%" + zone)[1:] if zone.startswith("25") else zone
    try:
        return ipaddress.IPv6Address(f"{address}%{zone}" if sep and zone else address)
    except ValueError:
        return None


def parse_host_ip(host: str) -> IPAddress | None:
    """The IP address a host string denotes as a literal in any resolver notation, else None."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.rstrip(".") if text.endswith(".") and ":" not in text else text
    if not text:
        return None
    if not text.isascii():
        try:
            text = text.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    if ":" in text:
        return _parse_ipv6(text)
    return _parse_ipv4(text)


def normalize_host(host: str) -> str:
    """Lower-case a host, drop brackets and one trailing dot, for allow-list comparison."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return text[:-1] if text.endswith(".") else text


def _resolve(host: str, port: int) -> list[IPAddress]:
    """All addresses getaddrinfo gives for host, de-duplicated in order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise ToolFailure("error", "fetch_failed", f"cannot resolve {host!r}: {exc}") from exc
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]))
        if ip not in found:
            found.append(ip)
    if not found:
        raise ToolFailure("error", "fetch_failed", f"cannot resolve {host!r}")
    return found


def resolve_checked(host: str, port: int, allowed_hosts: list[str]) -> list[IPAddress]:
    """Resolve host (blocking) and refuse it if any address is blocked, unless allow-listed."""
    name = normalize_host(host)
    if not name:
        raise ToolFailure("error", "invalid_arguments", "empty host")
    allowed = name in {normalize_host(h) for h in allowed_hosts}
    literal = parse_host_ip(name)
    addresses = [literal] if literal is not None else _resolve(name, port)
    if not allowed:
        blocked = [ip for ip in addresses if is_blocked_ip(ip)]
        if blocked:
            raise ToolFailure("denied", "blocked_address", f"host {host!r} resolves to a blocked address")
    return addresses
