"""CONTRIBUTING's folder map names only what exists, and every package of the tree."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("shared", "producer", "consumer", "fakevllm", "ocrq")


def folder_map() -> list[str]:
    """The lines of the code block under CONTRIBUTING.md's "The folder map"."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text.split("## The folder map", 1)[1]
    return section.split("```", 2)[1].splitlines()


def named_paths(lines: list[str]) -> tuple[set[str], set[str]]:
    """(folders, files) the map names: a folder opens a line, files follow under it."""
    folders: set[str] = set()
    files: set[str] = set()
    top = ""
    for line in lines:
        head = re.match(r"^([\w/]+/)\s", line + " ")
        if head:
            top = head.group(1)
            folders.add(top.rstrip("/"))
        for sub in re.findall(
            r"(?<![\w/.])(\w+)/(?=\s)", line[len(head.group(0)) if head else 0 :]
        ):
            folders.add(top + sub)
        for name in re.findall(r"(?<![\w/])(\w+\.py)\b", line):
            files.add(top + name)
    return folders, files


def packages() -> set[str]:
    """Every product folder that holds Python modules (linked folders by their root path)."""
    found = set()
    for root in PRODUCT:
        for init in (REPO / root).rglob("__init__.py"):
            folder = init.parent.relative_to(REPO).as_posix()
            if not any(part in {"static", "tessdata"} for part in init.parts):
                found.add(folder)
    return {f for f in found if not (f.startswith("ocrq/") and f.split("/")[1] in PRODUCT)}


def test_every_folder_and_file_the_map_names_exists() -> None:
    folders, files = named_paths(folder_map())
    missing = sorted(p for p in folders | files if not (REPO / p).exists())
    assert missing == [], f"CONTRIBUTING.md's folder map names what is not there: {missing}"
    assert len(files) > 20  # the map names modules, not folders alone


def test_the_map_names_every_package_of_the_tree() -> None:
    folders, _ = named_paths(folder_map())
    unnamed = sorted(packages() - folders - {"ocrq"})
    assert unnamed == [], f"packages missing from CONTRIBUTING.md's folder map: {unnamed}"
