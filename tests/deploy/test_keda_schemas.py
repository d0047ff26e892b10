"""Every KEDA object validates against KEDA's own CRD schema (openAPIV3Schema)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.deploy_tree import K8S, load_docs, manifest_files, validate_keda


def keda_objects(paths: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every object of a keda.sh API in those files."""
    return [
        (path, doc)
        for path in paths
        for doc in load_docs(path)
        if str(doc.get("apiVersion", "")).startswith("keda.sh/")
    ]


def test_keda_objects_exist_for_consumer_and_vllm() -> None:
    found = {(doc["kind"], doc["metadata"]["name"]) for _, doc in keda_objects(manifest_files())}
    assert ("ScaledObject", "ocrq-consumer") in found
    assert ("ScaledObject", "vllm") in found
    assert ("TriggerAuthentication", "ocrq-redis-keda") in found


@pytest.mark.parametrize(
    ("path", "obj"),
    keda_objects(manifest_files()),
    ids=lambda v: v.name if isinstance(v, Path) else f"{v['kind']}/{v['metadata']['name']}",
)
def test_keda_object_validates_against_crd_schema(path: Path, obj: dict[str, Any]) -> None:
    assert path.is_relative_to(K8S)
    validate_keda(obj)


def test_misspelt_scaledobject_field_fails_validation() -> None:
    obj = next(o for _, o in keda_objects(manifest_files()) if o["kind"] == "ScaledObject")
    broken = copy.deepcopy(obj)
    broken["spec"]["cooldownPeriods"] = broken["spec"].pop("cooldownPeriod")
    with pytest.raises(jsonschema.ValidationError, match="cooldownPeriods"):
        validate_keda(broken)


def test_trigger_without_metadata_fails_validation() -> None:
    obj = next(o for _, o in keda_objects(manifest_files()) if o["kind"] == "ScaledObject")
    broken = copy.deepcopy(obj)
    del broken["spec"]["triggers"][0]["metadata"]
    with pytest.raises(jsonschema.ValidationError, match="metadata"):
        validate_keda(broken)
