"""One installed namespace: the wheel holds only ocrq/, and no module imports a bare top level."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINKED = ("shared", "producer", "consumer", "fakevllm")  # folders ocrq/ links in
SERVER_MODULES = ("litestar", "uvicorn", "pymupdf", "fitz", "onnxruntime", "rapidocr_onnxruntime")


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


@pytest.mark.slow
def test_the_wheel_holds_only_the_ocrq_namespace(tmp_path: Path) -> None:
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
    (wheel,) = tmp_path.glob("ocrq-*.whl")
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
