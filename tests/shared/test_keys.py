"""Scripts ship as files with a header, and each is sent with exactly the helpers it needs."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from ocrq.shared.keys import SCRIPT_NAMES, load_script, script_needs, script_source

LIB = resources.files("ocrq.shared") / "scripts" / "lib"
HELPERS = {p.name.removesuffix(".lua") for p in LIB.iterdir() if p.name.endswith(".lua")}


def test_every_script_file_is_registered() -> None:
    shipped = resources.files("ocrq.shared") / "scripts"
    files = {p.name.removesuffix(".lua") for p in shipped.iterdir() if p.name.endswith(".lua")}
    assert files == set(SCRIPT_NAMES)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_each_script_header_names_keys_argv_reply_and_caller(name: str) -> None:
    header = script_source(name).split("\nlocal ", 1)[0]
    for part in ("-- KEYS:", "-- ARGV:", "-- Reply:", "-- Needs:", "Caller:"):
        assert part in header, (name, part)
    assert header.startswith(f"-- {name}:")


def calls(source: str) -> set[str]:
    """The helpers a piece of Lua calls."""
    return {h for h in HELPERS if re.search(rf"\b{h}\(", source.split("\n", 1)[-1])}


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_a_script_needs_exactly_the_helpers_it_calls(name: str) -> None:
    needed, todo = set(), calls(script_source(name))
    while todo:  # helpers call helpers: the closure
        helper = todo.pop()
        needed.add(helper)
        todo |= calls((LIB / f"{helper}.lua").read_text()) - needed - {helper}
    assert set(script_needs(script_source(name))) == needed


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_the_loaded_script_is_its_helpers_then_its_body(name: str) -> None:
    loaded, source = load_script(name), script_source(name)
    assert loaded.endswith(source)
    defined = set(re.findall(r"^local function (\w+)", loaded, re.MULTILINE))
    assert defined == set(script_needs(source))


def test_a_script_without_a_needs_line_is_refused() -> None:
    with pytest.raises(ValueError, match="Needs"):
        script_needs("-- claim: no header\nreturn 1\n")
