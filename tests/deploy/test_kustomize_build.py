"""Every kustomization resolves (pure Python, always), and kustomize builds it (when installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from support.deploy_tree import (
    K8S,
    K8S_VERSION,
    find,
    kustomization_dirs,
    manifest_files,
    resolve,
    validate_keda,
)

OVERLAY = K8S / "overlays" / "example"


def kustomize_command() -> list[str] | None:
    """`kustomize build` when on PATH, else kubectl's built-in kustomize, else None."""
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


@pytest.mark.parametrize("directory", kustomization_dirs(), ids=lambda p: str(p.relative_to(K8S)))
def test_kustomization_paths_resolve_and_patches_hit_objects(directory: Path) -> None:
    kind = (
        "Component"
        if yaml.safe_load((directory / "kustomization.yaml").read_text()).get("kind") == "Component"
        else "Kustomization"
    )
    tree = resolve(directory, kind)
    assert tree.problems == []
    assert tree.objects


def test_every_manifest_file_is_used_by_the_overlay() -> None:
    used = resolve(OVERLAY).files
    stray = [str(p.relative_to(K8S)) for p in manifest_files() if p.resolve() not in used]
    assert stray == []


def test_checker_reports_missing_resource_and_patch_without_target(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["missing.yaml", "cm.yaml"],
                "patches": [{"path": "patch.yaml"}],
            }
        )
    )
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    (tmp_path / "patch.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nowhere}\n"
    )
    problems = resolve(tmp_path).problems
    assert any("missing.yaml" in p for p in problems)
    assert any("nowhere" in p for p in problems)


def test_overlay_patches_apply_to_objects_from_base_and_components() -> None:
    tree = resolve(OVERLAY)
    find(tree.objects, "Deployment", "ocrq-consumer")
    find(tree.objects, "ScaledObject", "ocrq-consumer")
    find(tree.objects, "ScaledObject", "vllm")
    find(tree.objects, "ServiceMonitor", "vllm")


@pytest.mark.parametrize("directory", [K8S / "base", OVERLAY], ids=["base", "overlay"])
def test_kustomize_builds_and_output_validates(directory: Path) -> None:
    command = kustomize_command()
    if command is None:
        pytest.skip("neither kustomize nor kubectl is on PATH (pure-Python check still ran)")
    done = subprocess.run(
        [*command, str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    objects = [d for d in yaml.safe_load_all(done.stdout) if d]
    for obj in objects:
        api = obj["apiVersion"]
        if api.startswith("keda.sh/"):
            validate_keda(obj)
        elif not api.startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    dashboard = find(objects, "ConfigMap", "ocrq-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    if directory == OVERLAY:
        assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {
            "ocrq"
        }
        consumer = find(objects, "Deployment", "ocrq-consumer")
        pod = consumer["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"ocrq.io/pool": "gpu-adjacent"}
        assert pod["containers"][0]["image"] == "registry.example.com/ocrq/consumer:0.1.0"
        assert find(objects, "ScaledObject", "ocrq-consumer")["spec"]["maxReplicaCount"] == 16
        assert find(objects, "Deployment", "ocrq-producer")["spec"]["replicas"] == 3
