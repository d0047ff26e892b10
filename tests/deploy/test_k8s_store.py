"""The Kubernetes manifests name the object store's settings: the store stays off in the base,
its keys come from a placeholder Secret, and the workers' spool and shm fit it when on."""

from __future__ import annotations

import re
from typing import Any

from support.deploy_tree import base_objects, find

from ocrq.deploy import sizing
from ocrq.deploy.command import main as k8s_main
from ocrq.shared.settings import PLACEHOLDER_SECRET, Settings, load_settings

Obj = dict[str, Any]
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
STORE_SETTINGS = (
    "OCRQ_BLOB_URL",
    "OCRQ_S3_ENDPOINT",
    "OCRQ_INLINE_MAX_BYTES",
    "OCRQ_MAX_SOURCE_BYTES",
)
AWS_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
# What an operator sets to turn the store on.
STORE_ON = {"OCRQ_BLOB_URL": "s3://ocrq-documents/prod", "OCRQ_S3_ENDPOINT": ""}


def size(quantity: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]i)?", quantity)
    assert match, quantity
    return int(match[1]) * UNITS.get(match[2] or "", 1)


def config() -> dict[str, str]:
    data: dict[str, str] = find(base_objects(), "ConfigMap", "ocrq-config")["data"]
    return data


def pod(name: str) -> Obj:
    spec: Obj = find(base_objects(), "Deployment", name)["spec"]["template"]["spec"]
    return spec


def worker_settings(extra: dict[str, str]) -> Settings:
    """The consumer container's settings: the ConfigMap, its own env values, then ``extra``."""
    container = pod("ocrq-consumer")["containers"][0]
    own = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return load_settings({**config(), **own, **extra})


def test_the_config_names_the_store_settings_and_leaves_the_store_off() -> None:
    assert set(STORE_SETTINGS) <= set(config())
    assert not load_settings(config()).blobs.enabled  # Redis only until an operator says
    assert load_settings({**config(), **STORE_ON}).blobs.enabled


def test_both_roles_take_the_store_keys_from_a_placeholder_secret_they_may_do_without() -> None:
    secret = find(base_objects(), "Secret", "ocrq-s3")["stringData"]
    for key in AWS_KEYS:
        assert PLACEHOLDER_SECRET in secret[key]  # never a real key in the repository
    for name in ("ocrq-producer", "ocrq-consumer"):
        env = {e["name"]: e for e in pod(name)["containers"][0]["env"]}
        for key in AWS_KEYS:
            ref = env[key]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": "ocrq-s3", "key": key, "optional": True}, (name, key)


def test_the_worker_spools_big_documents_to_a_disk_volume_for_all_its_jobs() -> None:
    settings = worker_settings(STORE_ON)
    folder = settings.blobs.document_spool_dir
    assert folder, "OCRQ_DOCUMENT_SPOOL_DIR unset: big documents would spool into /tmp"
    container = pod("ocrq-consumer")["containers"][0]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == folder]
    volume = next(v for v in pod("ocrq-consumer")["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"].get("medium") != "Memory"  # disk, not RAM
    needed = sizing.document_spool_bytes(settings)
    assert needed == settings.worker.max_jobs * settings.blobs.max_source_bytes
    assert size(volume["emptyDir"]["sizeLimit"]) >= needed


def test_with_the_store_on_the_worker_shm_still_fits_its_documents_and_pages() -> None:
    on, off = worker_settings(STORE_ON), worker_settings({})
    shm = next(v for v in pod("ocrq-consumer")["volumes"] if v["name"] == "shm")
    assert size(shm["emptyDir"]["sizeLimit"]) >= sizing.shm_size_bytes(on)
    # A store moves documents out of the shm up to OCRQ_SPOOL_SHM_MAX_MB each, no more.
    assert sizing.shm_document_bytes(on) == on.blobs.spool_shm_max_mb * 2**20
    assert sizing.shm_document_bytes(off) == off.api.max_document_bytes
    assert sizing.document_spool_bytes(off) == 0


def test_ocrq_k8s_sizing_prints_the_document_spool_with_a_store(
    capsys: Any, monkeypatch: Any
) -> None:
    for name, value in STORE_ON.items():
        monkeypatch.setenv(name, value)
    assert k8s_main(["sizing"]) == 0
    out = capsys.readouterr().out
    assert "/dev/shm per worker" in out and "document spool per worker" in out
    monkeypatch.delenv("OCRQ_BLOB_URL")
    assert k8s_main(["sizing"]) == 0
    assert "document spool" not in capsys.readouterr().out
