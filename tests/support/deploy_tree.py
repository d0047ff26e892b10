"""The deploy tree as data: manifests under k8s/, and a pure-Python kustomization check.

The check resolves every path a kustomization.yaml names (resources, components,
generator files, patch files) and confirms every patch targets an object that exists
in what that kustomization accumulates. It needs no kustomize binary, so it always runs.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
K8S = REPO_ROOT / "k8s"
KEDA_SCHEMAS = REPO_ROOT / "tests" / "deploy" / "schemas" / "keda"  # source and version: its README
K8S_VERSION = "1.30.0"  # a version kubernetes-validate ships; KEDA 2.15+ supports it
# Overlays that are alternatives to overlays/example, built on it.
VARIANTS = (K8S / "overlays" / "vllm-sidecar",)

Obj = dict[str, Any]


def load_docs(path: Path) -> list[Obj]:
    """Every non-empty YAML document in a file."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def object_key(obj: Obj) -> tuple[str, str]:
    """(kind, name): how a patch names its target."""
    return obj["kind"], obj.get("metadata", {}).get("name", "")


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    """The one object of that kind and name; fails loudly when absent."""
    matches = [o for o in objects if object_key(o) == (kind, name)]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


@dataclass
class Tree:
    """What a kustomization accumulates, and every problem found on the way."""

    objects: list[Obj] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    files: set[Path] = field(default_factory=set)


def _kustomization_file(directory: Path) -> Path | None:
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if (directory / name).is_file():
            return directory / name
    return None


def resolve(directory: Path, expect_kind: str = "Kustomization") -> Tree:
    """Resolve one kustomization folder (recursively) into its objects and problems."""
    tree = Tree()
    path = _kustomization_file(directory)
    if path is None:
        tree.problems.append(f"{directory}: no kustomization.yaml")
        return tree
    tree.files.add(path.resolve())
    spec = load_docs(path)[0]
    if spec.get("kind", "Kustomization") != expect_kind:
        tree.problems.append(f"{path}: kind {spec.get('kind')!r}, expected {expect_kind}")
    for entry in spec.get("resources", []):
        _add_resource(tree, directory, entry)
    _add_generators(tree, directory, spec)
    for entry in spec.get("components", []):
        _merge(tree, resolve((directory / entry).resolve(), "Component"))
    for patch in spec.get("patches", []):
        _check_patch(tree, directory, patch)
    return tree


def _merge(tree: Tree, other: Tree) -> None:
    tree.objects.extend(other.objects)
    tree.problems.extend(other.problems)
    tree.files |= other.files


def _add_resource(tree: Tree, directory: Path, entry: str) -> None:
    target = (directory / entry).resolve()
    if target.is_dir():
        _merge(tree, resolve(target))
    elif target.is_file():
        tree.files.add(target)
        tree.objects.extend(load_docs(target))
    else:
        tree.problems.append(f"{directory}: resource {entry!r} does not exist")


def _add_generators(tree: Tree, directory: Path, spec: Obj) -> None:
    for kind, key in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
        for generator in spec.get(key, []):
            for source in [*generator.get("files", []), *generator.get("envs", [])]:
                file_part = source.split("=", 1)[-1]
                if not (directory / file_part).is_file():
                    tree.problems.append(f"{directory}: {key} file {file_part!r} missing")
                tree.files.add((directory / file_part).resolve())
            tree.objects.append(
                {"apiVersion": "v1", "kind": kind, "metadata": {"name": generator["name"]}}
            )


def _check_patch(tree: Tree, directory: Path, patch: Obj) -> None:
    body: Any = patch.get("patch")
    if "path" in patch:
        file = directory / patch["path"]
        if not file.is_file():
            tree.problems.append(f"{directory}: patch file {patch['path']!r} missing")
            return
        tree.files.add(file.resolve())
        body = yaml.safe_load(file.read_text())
    elif isinstance(body, str):
        body = yaml.safe_load(body)
    target = patch.get("target")
    if target is None and isinstance(body, dict):
        target = {"kind": body.get("kind"), "name": body.get("metadata", {}).get("name")}
    if target is None:
        tree.problems.append(f"{directory}: a JSON6902 patch without a target")
        return
    wanted = (target.get("kind"), target.get("name"))
    if not any(object_key(o) == wanted for o in tree.objects):
        tree.problems.append(f"{directory}: patch targets {wanted}, which does not exist")


def manifest_files() -> list[Path]:
    """Every YAML file under k8s/ that is not a kustomization."""
    return sorted(
        p for p in K8S.rglob("*.yaml") if p.name not in ("kustomization.yaml", "kustomization.yml")
    )


def kustomization_dirs() -> list[Path]:
    """Every folder under k8s/ holding a kustomization."""
    return sorted(p.parent for p in K8S.rglob("kustomization.yaml"))


def base_objects() -> list[Obj]:
    """The base's objects, as kustomize would accumulate them (before any overlay)."""
    return resolve(K8S / "base").objects


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


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Schema]:
    """KEDA's CRD schemas by (apiVersion, kind), made strict about unknown fields."""
    assert KEDA_SCHEMAS.is_dir(), f"KEDA CRD schemas missing at {KEDA_SCHEMAS}"
    schemas = {}
    for path in sorted(KEDA_SCHEMAS.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = version["schema"]["openAPIV3Schema"]
                schemas[(f"{group}/{version['name']}", kind)] = _strict(schema)
    return schemas


def validate_keda(obj: Obj) -> None:
    """Raise jsonschema.ValidationError unless obj fits its KEDA CRD schema."""
    schema = crd_schemas()[(obj["apiVersion"], obj["kind"])]
    jsonschema.Draft7Validator(schema).validate(obj)


def kustomize_build(directory: Path) -> list[Obj] | None:
    """What kustomize (or kubectl's built-in one) builds there; None when neither is on PATH."""
    if shutil.which("kustomize"):
        command = ["kustomize", "build"]
    elif shutil.which("kubectl"):
        command = ["kubectl", "kustomize"]
    else:
        return None
    done = subprocess.run(
        [*command, str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def validate_built(obj: Obj) -> None:
    """Raise unless a built object fits its schema (Prometheus Operator CRDs are not checked)."""
    api = obj["apiVersion"]
    if api.startswith("keda.sh/"):
        validate_keda(obj)
    elif not api.startswith("monitoring.coreos.com/"):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def redis_startup_users(tmp_path: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """Run the Redis StatefulSet's start-up script (not Redis) with ``env``: the ACL file's
    users, each with its rules."""
    statefulset = find(base_objects(), "StatefulSet", "redis")
    script = statefulset["spec"]["template"]["spec"]["containers"][0]["command"][2]
    acl_file = tmp_path / "users.acl"
    script = script.replace("/run/redis/users.acl", str(acl_file))
    script = script.replace("exec redis-server /etc/redis/redis.conf", "")
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=10)
    users = {}
    for line in acl_file.read_text().splitlines():
        word, name, *rules = line.split()
        assert word == "user"
        users[name] = rules
    return users
