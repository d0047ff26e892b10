"""Every KEDA object validates against KEDA's own CRD schema (openAPIV3Schema)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from deploy_tree import K8S, KEDA_SCHEMAS, load_docs, manifest_files

Schema = dict[str, Any]


def _strict(schema: Schema) -> Schema:
    """Forbid unknown fields where the CRD lists properties, as the API server prunes them.

    A misspelt field (``cooldownPeriods``) would otherwise pass validation and then be
    dropped silently by the cluster.
    """
    schema = copy.deepcopy(schema)
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            if isinstance(value, dict):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(value)
    return schema


def _load_crd_schemas() -> dict[tuple[str, str], Schema]:
    if not KEDA_SCHEMAS.is_dir():
        pytest.fail(f"KEDA CRD schemas missing at {KEDA_SCHEMAS} (shared/ beside the repo)")
    schemas = {}
    for path in sorted(KEDA_SCHEMAS.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = version["schema"]["openAPIV3Schema"]
                schemas[(f"{group}/{version['name']}", kind)] = _strict(schema)
    return schemas


CRD_SCHEMAS = _load_crd_schemas()


def keda_objects(paths: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every object of a keda.sh API in those files."""
    return [
        (path, doc)
        for path in paths
        for doc in load_docs(path)
        if str(doc.get("apiVersion", "")).startswith("keda.sh/")
    ]


def validate_keda(obj: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless obj fits its KEDA CRD schema."""
    schema = CRD_SCHEMAS[(obj["apiVersion"], obj["kind"])]
    jsonschema.Draft7Validator(schema).validate(obj)


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
