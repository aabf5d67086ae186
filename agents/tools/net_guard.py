"""The SSRF guard of `web_fetch`: which addresses may be fetched, enforced per connection.

An address may be fetched only if it is plainly global: `ipaddress`'s `is_global`, and in no
entry of the IANA IPv4 and IPv6 Special-Purpose Address Registries (`SPECIAL_PURPOSE`, copied
here so the answer does not change with the Python version: AS112, AMT, the 6to4 relay anycast,
ORCHIDv2, the 2001::/23 protocol assignments, the 3fff::/20 documentation prefix, ...), never
multicast, never outside 2000::/3 for IPv6, and never a cloud metadata address
(`CLOUD_METADATA`: 169.254.169.254, fd00:ec2::254, 168.63.129.16, 100.100.100.200, ...). IPv6
forms that carry an IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo) are
judged by the IPv4 address inside first; only mapped and NAT64 addresses can then pass. The host
or address may be allow-listed (`allow_hosts`).

Every TCP connection (the first request and each redirect hop, followed manually) gets its
addresses from `GuardedResolver`, which aiohttp's connector asks for each new connection: it
resolves the host once, checks every address, and hands aiohttp exactly the addresses it
checked, so a DNS answer that changes between check and connect (rebinding) cannot redirect
the socket. An IP literal is not resolved (aiohttp connects to it directly), so the tool also
checks each hop's host before its request (`resolve_checked` reads a literal in any numeric
form without DNS). TLS still verifies the
certificate against the URL's host name. Residual risks, stated plainly: no proxy is used, so
deployments that must egress through a proxy cannot use this tool; a public host may itself
relay to private services (an open redirector is handled, an open proxy is not); and an
allow-listed host name is trusted whatever it resolves to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp.abc import AbstractResolver, ResolveResult

from agents.tools.base import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class FetchRefused(ToolError):
    """The target is not reachable under the SSRF policy; raised before any connection."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64, 6to4 or Teredo address carries, if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def address_problem(ip: IPAddress) -> str | None:
    """Why `ip` must not be fetched ("loopback", "private", ...), or None for a global address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = address_problem(embedded)
            if inner is not None:
                return f"{inner} (embedded in {ip})"
            if ip.ipv4_mapped is not None or ip in _NAT64:
                return None  # the packet goes to the (global) IPv4 address inside
    for label, test in _LABELS:
        if test(ip):
            return label
    if not ip.is_global or any(ip.version == n.version and ip in n for n in _NOT_GLOBAL):
        return "non-global"
    for network, label in SPECIAL_PURPOSE:
        if ip.version == network.version and ip in network:
            return f"special-purpose ({label})"
    if ip.version == 6 and ip not in _GLOBAL_UNICAST_V6:
        return "reserved (outside 2000::/3)"
    if ip in CLOUD_METADATA:
        return f"cloud metadata ({CLOUD_METADATA[ip]})"
    return None


_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Not global, though Python 3.11's is_global says they are.
_NOT_GLOBAL: tuple[IPNetwork, ...] = (
    ipaddress.IPv4Network("192.0.0.0/24"),  # IETF protocol assignments; 192.0.0.192 metadata
    ipaddress.IPv6Network("fec0::/10"),  # deprecated site-local
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # local-use NAT64 (RFC 8215)
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
# The IANA IPv4 and IPv6 Special-Purpose Address Registries (as of 2025): every entry that is
# not plainly a host on the internet. Several are "globally reachable" in the registry's terms
# (anycast services such as AS112, AMT, ORCHIDv2, DETs) but no page a model should fetch.
SPECIAL_PURPOSE: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), label)
    for net, label in (
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private-use"),
        ("100.64.0.0/10", "shared address space"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private-use"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.31.196.0/24", "AS112-v4"),
        ("192.52.193.0/24", "AMT"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private-use"),
        ("192.175.48.0/24", "AS112 direct delegation"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "limited broadcast"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
        ("100::/64", "discard-only"),
        ("100:0:0:1::/64", "dummy prefix"),
        ("2001::/23", "IETF protocol assignments: Teredo, AMT, AS112, ORCHIDv2, anycast"),
        ("2001:db8::/32", "documentation"),
        ("2002::/16", "6to4"),
        ("2620:4f:8000::/48", "AS112 direct delegation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing SIDs"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
    )
)
# Cloud instance metadata and host services, wherever they sit in the address space.
CLOUD_METADATA: dict[IPAddress, str] = {
    ipaddress.ip_address(address): provider
    for address, provider in (
        ("169.254.169.254", "AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, ..."),
        ("169.254.169.123", "AWS time sync"),
        ("169.254.170.2", "AWS ECS task metadata"),
        ("169.254.170.23", "AWS EKS pod identity"),
        ("169.254.0.23", "Tencent Cloud"),
        ("fd00:ec2::254", "AWS IPv6"),
        ("fd00:ec2::23", "AWS EKS pod identity IPv6"),
        ("fd00:ec2::123", "AWS time sync IPv6"),
        ("168.63.129.16", "Azure WireServer"),
        ("100.100.100.200", "Alibaba Cloud"),
        ("192.0.0.192", "Oracle Cloud"),
    )
}
_LABELS: tuple[tuple[str, Any], ...] = (
    ("unspecified", lambda ip: ip.is_unspecified),
    ("loopback", lambda ip: ip.is_loopback),
    ("link-local (includes cloud metadata endpoints)", lambda ip: ip.is_link_local),
    ("multicast", lambda ip: ip.is_multicast),
    ("carrier-grade NAT (100.64.0.0/10)", lambda ip: ip.version == 4 and ip in _CGNAT),
    ("site-local", lambda ip: ip.version == 6 and ip.is_site_local),
    ("reserved", lambda ip: ip.is_reserved),
    ("private", lambda ip: ip.is_private),
)


@dataclass(frozen=True, slots=True)
class AllowList:
    """Host names (exact, or `*.example.com` for subdomains), IP addresses and CIDR networks
    that may be fetched even though they resolve to non-public addresses."""

    hosts: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        hosts: set[str] = set()
        suffixes: list[str] = []
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower().rstrip(".")
            if entry.startswith("[") and entry.endswith("]"):
                entry = entry[1:-1]
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if entry.startswith("*."):
                suffixes.append(entry[1:])
            else:
                hosts.add(entry)
        return cls(frozenset(hosts), tuple(suffixes), tuple(networks))

    def allows_host(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return name in self.hosts or any(name.endswith(s) for s in self.suffixes)

    def allows_address(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)

    def for_port(self, port: int) -> AllowList:
        """The list that holds for connections to `port`: this one, whatever the port
        (`browser_guard.BrowserAllow` has entries for one port only)."""
        return self


class PortAllow(Protocol):
    """What `GuardedResolver` asks: the allow-list for connections to a port."""

    def for_port(self, port: int) -> AllowList: ...


async def resolve_checked(host: str, port: int, allow: AllowList) -> list[str]:
    """The addresses of `host` if every one may be fetched, else FetchRefused.

    IP literals (any form the C resolver accepts numerically, such as `2130706433`) are
    parsed without DNS; names are resolved with the event loop's getaddrinfo.
    """
    name = host.lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
        )
    except (socket.gaierror, UnicodeError):
        try:
            infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ToolError(f"cannot resolve host {host!r} ({exc.strerror})") from None
        except UnicodeError as exc:
            raise ToolError(f"invalid host name {host!r} ({exc})") from None
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise ToolError(f"cannot resolve host {host!r} (no addresses)")
    if not allow.allows_host(name):
        for ip in addresses:
            problem = address_problem(ip)
            if problem is not None and not allow.allows_address(ip):
                shown = host if str(ip) == name else f"{host} (resolves to {ip})"
                raise FetchRefused(
                    f"refused to fetch {shown}: a {problem} address. web_fetch only reaches "
                    "public internet hosts; the owner can add this host to the web_fetch "
                    "allow_hosts setting if it is meant to be reachable"
                )
    return [str(ip) for ip in addresses]


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver for web_fetch and the browser: the checked addresses of a host (as
    `allow.for_port(port)` allows them), or `FetchRefused`."""

    def __init__(self, allow: PortAllow) -> None:
        self._allow = allow

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await resolve_checked(host, port, self._allow.for_port(port))
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        return None
