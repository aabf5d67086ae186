"""web_fetch's SSRF guard against the IANA special-purpose registries and cloud metadata.

Each entry of the IPv4 and IPv6 Special-Purpose Address Registries that is not plainly a host
on the internet is refused (its first, a middle and its last address), whatever the running
Python's `ipaddress` thinks of it; so is every cloud metadata address, also in the IPv6 forms
that carry an IPv4 address. Plainly global addresses still pass.
"""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.tools import net_guard
from agents.tools.net_guard import address_problem

# The registries (https://www.iana.org/assignments/iana-ipv4-special-registry,
# .../iana-ipv6-special-registry), each block with why it must not be fetched.
REGISTRY = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.0.0/29",
    "192.0.0.8/32",
    "192.0.0.9/32",  # PCP anycast
    "192.0.0.10/32",  # TURN anycast
    "192.0.0.170/31",
    "192.0.2.0/24",
    "192.31.196.0/24",  # AS112-v4
    "192.52.193.0/24",  # AMT
    "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
    "192.168.0.0/16",
    "192.175.48.0/24",  # AS112 direct delegation
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "240.0.0.0/4",
    "255.255.255.255/32",
    "::1/128",
    "::/128",
    "::ffff:0:0/96",
    "64:ff9b:1::/48",
    "100::/64",
    "100:0:0:1::/64",
    "2001::/23",
    "2001::/32",  # Teredo
    "2001:1::1/128",
    "2001:1::2/128",
    "2001:1::3/128",
    "2001:2::/48",
    "2001:3::/32",  # AMT
    "2001:4:112::/48",  # AS112-v6
    "2001:10::/28",
    "2001:20::/28",  # ORCHIDv2
    "2001:30::/28",  # drone remote ID tags
    "2001:db8::/32",
    "2002::/16",  # 6to4
    "2620:4f:8000::/48",  # AS112 direct delegation
    "3fff::/20",  # documentation (RFC 9637)
    "5f00::/16",  # SRv6 SIDs
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
]
METADATA = [
    "169.254.169.254",
    "169.254.170.2",
    "fd00:ec2::254",
    "168.63.129.16",
    "100.100.100.200",
    "192.0.0.192",
    "::ffff:168.63.129.16",
    "64:ff9b::a83f:8110",  # NAT64 form of 168.63.129.16
    "2002:a83f:8110::1",  # 6to4 form of 168.63.129.16
]


def _samples(network: str) -> list[str]:
    net = ipaddress.ip_network(network)
    middle = net.network_address + net.num_addresses // 2
    return sorted({str(net.network_address), str(middle), str(net.broadcast_address)})


@pytest.mark.parametrize(
    "address",
    [
        a
        for n in REGISTRY
        for a in _samples(n)
        if n != "::ffff:0:0/96"  # mapped: judged by the IPv4 address inside, below
    ],
)
def test_every_special_purpose_block_is_refused(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["::ffff:0.0.0.1", "::ffff:127.0.0.1", "::ffff:192.31.196.1"])
def test_ipv4_mapped_forms_of_special_addresses_are_refused(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", METADATA)
def test_cloud_metadata_addresses_are_refused(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize(
    ("address", "label"),
    [
        ("192.31.196.1", "AS112-v4"),
        ("192.52.193.7", "AMT"),
        ("192.88.99.1", "6to4 relay anycast"),
        ("192.175.48.6", "AS112 direct delegation"),
        ("2620:4f:8000::1", "AS112 direct delegation"),
        ("3fff::1", "documentation"),
        ("168.63.129.16", "Azure WireServer"),
    ],
)
def test_refusals_say_which_block_it_is(address: str, label: str) -> None:
    problem = address_problem(ipaddress.ip_address(address))
    assert problem is not None and label in problem


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:9.9.9.9"],
)
def test_plainly_global_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


def test_the_tables_cover_the_registry_and_the_metadata_list() -> None:
    listed = {str(net) for net, _ in net_guard.SPECIAL_PURPOSE}
    for block in ("192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "3fff::/20"):
        assert block in listed
    assert {str(ip) for ip in net_guard.CLOUD_METADATA} >= set(METADATA[:6])


@given(st.ip_addresses())
def test_no_address_inside_a_special_block_ever_passes(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    if address_problem(ip) is None:
        blocks = net_guard.SPECIAL_PURPOSE
        assert not any(ip.version == net.version and ip in net for net, _ in blocks)
        assert ip not in net_guard.CLOUD_METADATA
