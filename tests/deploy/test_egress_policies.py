"""Egress NetworkPolicies: workers reach DNS, Redis, vLLM and public 80/443; the producer less."""

from __future__ import annotations

import ipaddress
from typing import Any

from support.deploy_tree import base_objects, find

Obj = dict[str, Any]
PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
              "127.0.0.0/8", "100.64.0.0/10"]  # fmt: skip


def labels_of(name: str) -> dict[str, str]:
    workload = find(base_objects(), "Deployment", name)
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def peers(policy: Obj) -> list[tuple[Obj, set[tuple[str, int]]]]:
    """(peer, {(protocol, port)}) of every egress rule's every peer."""
    out = []
    for rule in policy["spec"]["egress"]:
        ports = {(p.get("protocol", "TCP"), int(p["port"])) for p in rule["ports"]}
        out += [(peer, ports) for peer in rule["to"]]
    return out


def pod_peer(found: list[tuple[Obj, set[tuple[str, int]]]], name: str) -> set[tuple[str, int]]:
    """The ports a policy opens to the pods named app.kubernetes.io/name=name."""
    ports: set[tuple[str, int]] = set()
    for peer, opened in found:
        if peer.get("podSelector", {}).get("matchLabels") == {"app.kubernetes.io/name": name}:
            ports |= opened
    return ports


def dns_ports(found: list[tuple[Obj, set[tuple[str, int]]]]) -> set[tuple[str, int]]:
    ports: set[tuple[str, int]] = set()
    for peer, opened in found:
        if peer.get("podSelector", {}).get("matchLabels") == {"k8s-app": "kube-dns"}:
            assert peer["namespaceSelector"]["matchLabels"] == {
                "kubernetes.io/metadata.name": "kube-system"
            }
            ports |= opened
    return ports


def test_workers_reach_dns_redis_vllm_and_public_web_ports_only() -> None:
    policy = find(base_objects(), "NetworkPolicy", "consumer-egress")
    assert policy["spec"]["policyTypes"] == ["Egress"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= labels_of("ocrq-consumer").items()
    found = peers(policy)
    assert dns_ports(found) == {("UDP", 53), ("TCP", 53)}
    assert pod_peer(found, "redis") == {("TCP", 6379)}
    assert pod_peer(found, "vllm") == {("TCP", 8000)}
    blocks = [(peer["ipBlock"], ports) for peer, ports in found if "ipBlock" in peer]
    assert blocks and all(ports == {("TCP", 80), ("TCP", 443)} for _, ports in blocks)
    v4 = next(b for b, _ in blocks if b["cidr"] == "0.0.0.0/0")
    excepted = [ipaddress.ip_network(c) for c in v4["except"]]
    for private in map(ipaddress.ip_network, PRIVATE_V4):
        assert any(private.subnet_of(e) for e in excepted), private


def public_blocks(
    found: list[tuple[Obj, set[tuple[str, int]]]],
) -> list[tuple[Obj, set[tuple[str, int]]]]:
    """The ipBlock peers, each checked to leave out every private IPv4 range."""
    blocks = [(peer["ipBlock"], ports) for peer, ports in found if "ipBlock" in peer]
    for block, _ in blocks:
        if block["cidr"] == "0.0.0.0/0":
            excepted = [ipaddress.ip_network(c) for c in block["except"]]
            for private in map(ipaddress.ip_network, PRIVATE_V4):
                assert any(private.subnet_of(e) for e in excepted), private
    return blocks


def test_the_producer_reaches_only_dns_redis_and_the_object_store_over_https() -> None:
    policy = find(base_objects(), "NetworkPolicy", "producer-egress")
    assert policy["spec"]["policyTypes"] == ["Egress"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= labels_of("ocrq-producer").items()
    found = peers(policy)
    assert dns_ports(found) == {("UDP", 53), ("TCP", 53)}
    assert pod_peer(found, "redis") == {("TCP", 6379)}
    # The store (OCRQ_BLOB_URL): S3 over HTTPS on public addresses; no port 80, nothing private.
    blocks = public_blocks(found)
    assert {b["cidr"] for b, _ in blocks} == {"0.0.0.0/0", "::/0"}
    assert all(ports == {("TCP", 443)} for _, ports in blocks)
    assert len(found) == 2 + len(blocks)
