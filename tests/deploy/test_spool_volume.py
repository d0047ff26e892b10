"""The producer's ZIP spool: the folder the settings name is a volume that holds every slot."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from support.deploy_tree import K8S, VARIANTS, base_objects, find, kustomize_build

from ocrq.shared.settings import Settings, load_settings

Obj = dict[str, Any]
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}


def size(quantity: str) -> int:
    """Bytes of a Kubernetes quantity such as 4Gi."""
    match = re.fullmatch(r"(\d+)([KMGT]i|[kMG])?", quantity)
    assert match, f"unreadable quantity {quantity!r}"
    return int(match[1]) * UNITS.get(match[2] or "", 1)


def producer_settings(objects: list[Obj], producer: Obj) -> Settings:
    """What the producer container reads: its ConfigMap, then its own env on top."""
    config = find(objects, "ConfigMap", "ocrq-config").get("data", {})
    own = {e["name"]: e["value"] for e in producer.get("env", []) if "value" in e}
    return load_settings({**config, **own})


def spool_problems(objects: list[Obj]) -> list[str]:
    """Every way the producer's spool folder and its volume disagree."""
    pod = find(objects, "Deployment", "ocrq-producer")["spec"]["template"]["spec"]
    producer = next(c for c in pod["containers"] if c["name"] == "producer")
    settings = producer_settings(objects, producer)
    if not settings.uploads.spool_dir:
        return ["OCRQ_SPOOL_DIR is unset: ZIP batches would spool in /tmp"]
    mounts = [
        m for m in producer.get("volumeMounts", []) if m["mountPath"] == settings.uploads.spool_dir
    ]
    if not mounts:
        return [f"no volume is mounted at OCRQ_SPOOL_DIR={settings.uploads.spool_dir}"]
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[0]["name"])
    if "emptyDir" not in volume or "sizeLimit" not in volume["emptyDir"]:
        return [f"volume {volume['name']} is not an emptyDir with a sizeLimit"]
    if volume["emptyDir"].get("medium") == "Memory":
        return [f"volume {volume['name']} is in memory: a spooled upload would count as RAM"]
    needed = settings.uploads.spool_slots * settings.uploads.max_batch_bytes
    if size(volume["emptyDir"]["sizeLimit"]) < needed:
        return [
            f"volume {volume['name']} holds {volume['emptyDir']['sizeLimit']}, under "
            f"OCRQ_SPOOL_SLOTS x OCRQ_MAX_BATCH_BYTES = {needed} bytes"
        ]
    return []


def test_the_base_producer_spools_into_a_volume_that_holds_every_slot() -> None:
    assert spool_problems(base_objects()) == []


@pytest.mark.parametrize("overlay", [K8S / "overlays" / "example", *VARIANTS], ids=str)
def test_every_overlay_keeps_the_spool_and_its_volume_in_step(overlay: Path) -> None:
    built = kustomize_build(overlay)
    if built is None:
        pytest.skip("neither kustomize nor kubectl on PATH")
    assert spool_problems(built) == []


def producer_pod(objects: list[Obj]) -> Obj:
    pod: Obj = find(objects, "Deployment", "ocrq-producer")["spec"]["template"]["spec"]
    return pod


def test_a_volume_too_small_for_the_slots_is_caught() -> None:
    objects = copy.deepcopy(base_objects())
    config = find(objects, "ConfigMap", "ocrq-config")
    config["data"] = {**config["data"], "OCRQ_SPOOL_SLOTS": "8"}  # 8 GiB into 4Gi
    assert "under OCRQ_SPOOL_SLOTS" in " ".join(spool_problems(objects))


def test_a_spool_dir_that_no_volume_backs_is_caught() -> None:
    objects = copy.deepcopy(base_objects())
    producer = producer_pod(objects)["containers"][0]
    for env in producer["env"]:
        if env["name"] == "OCRQ_SPOOL_DIR":
            env["value"] = "/var/spool/elsewhere"
    assert spool_problems(objects) == [
        "no volume is mounted at OCRQ_SPOOL_DIR=/var/spool/elsewhere"
    ]
