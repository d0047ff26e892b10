"""`ocrq mcp` reads a local `path` only under its allowed roots (OCRQ_MCP_ROOTS).

A document with a prompt injection can steer an agent into asking for any file its server's
user can read; the roots bound what the tool will ever read, symlinks and `..` included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.documents import png
from support.mcp_harness import mcp_session, text_of

from ocrq.mcp.inputs import config_from_env
from ocrq.mcp.roots import OutsideRoots, open_checked, read_under_roots
from ocrq.shared.errors import ErrorCode, OcrqError

OUTSIDE = "is outside the allowed roots (OCRQ_MCP_ROOTS)"


def folders(tmp_path: Path) -> tuple[Path, Path]:
    """A root with a readable image, and a folder beside it with a 'private' one."""
    root, private = tmp_path / "root", tmp_path / "private"
    root.mkdir()
    private.mkdir()
    (root / "scan.png").write_bytes(png(20, 20))
    (private / "secret.png").write_bytes(png(30, 30))
    return root, private


async def test_a_path_outside_the_allowed_roots_is_refused_with_invalid_request(
    api_url: str, tmp_path: Path
) -> None:
    root, private = folders(tmp_path)
    async with mcp_session(api_url, tmp_path, OCRQ_MCP_ROOTS=str(root)) as mcp:
        inside = await mcp.call_tool("submit_document", {"path": str(root / "scan.png")})
        outside = await mcp.call_tool("submit_document", {"path": str(private / "secret.png")})
        missing = await mcp.call_tool("submit_document", {"path": str(private / "nothing.png")})
    assert not inside.is_error, text_of(inside)
    assert outside.is_error
    assert text_of(outside) == f"invalid_request: path {private / 'secret.png'} {OUTSIDE}"
    # Outside the roots, a missing file reads as any other: no probing what exists there.
    assert text_of(missing) == f"invalid_request: path {private / 'nothing.png'} {OUTSIDE}"


async def test_a_symlink_in_a_root_pointing_outside_is_refused(
    api_url: str, tmp_path: Path
) -> None:
    root, private = folders(tmp_path)
    (root / "innocent.png").symlink_to(private / "secret.png")
    (root / "folder").symlink_to(private, target_is_directory=True)
    (root / "alias.png").symlink_to(root / "scan.png")  # a link that stays inside is fine
    async with mcp_session(api_url, tmp_path, OCRQ_MCP_ROOTS=str(root)) as mcp:
        to_file = await mcp.call_tool("submit_document", {"path": str(root / "innocent.png")})
        via_dir = await mcp.call_tool("submit_document", {"path": str(root / "folder/secret.png")})
        alias = await mcp.call_tool("submit_document", {"path": str(root / "alias.png")})
    assert text_of(to_file) == f"invalid_request: path {root / 'innocent.png'} {OUTSIDE}"
    assert text_of(via_dir) == f"invalid_request: path {root / 'folder/secret.png'} {OUTSIDE}"
    assert not alias.is_error, text_of(alias)
    assert alias.structured_content["filename"] == "alias.png"


async def test_dot_dot_cannot_climb_out_of_a_root(api_url: str, tmp_path: Path) -> None:
    root, _ = folders(tmp_path)
    climb = f"{root}/../private/secret.png"
    # A root whose name starts another folder's name does not admit that folder.
    (tmp_path / "root-2").mkdir()
    (tmp_path / "root-2/x.png").write_bytes(png(10, 10))
    async with mcp_session(api_url, tmp_path, OCRQ_MCP_ROOTS=str(root)) as mcp:
        refused = await mcp.call_tool("submit_document", {"path": climb})
        sibling = await mcp.call_tool("submit_document", {"path": str(tmp_path / "root-2/x.png")})
    assert text_of(refused) == f"invalid_request: path {climb} {OUTSIDE}"
    assert text_of(sibling).endswith(OUTSIDE)


async def test_by_default_only_the_working_directory_is_readable(
    api_url: str, tmp_path: Path
) -> None:
    root, private = folders(tmp_path)
    async with mcp_session(api_url, tmp_path, cwd=root, OCRQ_MCP_ROOTS="") as mcp:
        relative = await mcp.call_tool("submit_document", {"path": "scan.png"})
        outside = await mcp.call_tool("submit_document", {"path": str(private / "secret.png")})
    assert not relative.is_error, text_of(relative)
    assert outside.is_error and text_of(outside).endswith(OUTSIDE)


async def test_several_roots_are_joined_with_the_path_separator(
    api_url: str, tmp_path: Path
) -> None:
    root, private = folders(tmp_path)
    roots = os.pathsep.join([str(root), str(private)])
    async with mcp_session(api_url, tmp_path, OCRQ_MCP_ROOTS=roots) as mcp:
        first = await mcp.call_tool("submit_document", {"path": str(root / "scan.png")})
        second = await mcp.call_tool("submit_document", {"path": str(private / "secret.png")})
    assert not first.is_error and not second.is_error, (text_of(first), text_of(second))


def test_a_root_that_does_not_exist_stops_the_server_at_start(tmp_path: Path) -> None:
    env = {**os.environ, "OCRQ_MCP_ROOTS": str(tmp_path / "no-such-folder")}
    run = subprocess.run(
        [sys.executable, "-m", "ocrq.cli", "mcp"], capture_output=True, text=True,
        timeout=60, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith("ocrq mcp: OCRQ_MCP_ROOTS: ") and "no-such-folder" in run.stderr


def test_a_file_over_the_document_limit_is_refused_without_reading_it_whole(
    tmp_path: Path,
) -> None:
    (tmp_path / "big.png").write_bytes(png(20, 20) + b"\0" * 5000)
    config = config_from_env({"OCRQ_MCP_ROOTS": str(tmp_path), "OCRQ_MAX_DOCUMENT_BYTES": "4096"})
    with pytest.raises(OcrqError, match=r"big.png: over 4096 bytes$") as refused:
        read_under_roots(str(tmp_path / "big.png"), config.roots, config.max_bytes)
    assert refused.value.code is ErrorCode.PAYLOAD_TOO_LARGE


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.png")  # opening a FIFO for reading would wait for a writer
    config = config_from_env({"OCRQ_MCP_ROOTS": str(tmp_path)})
    for name in ("pipe.png", "."):
        with pytest.raises(OcrqError, match=r" is not a regular file$") as refused:
            read_under_roots(str(tmp_path / name), config.roots, config.max_bytes)
        assert refused.value.code is ErrorCode.INVALID_REQUEST


def test_a_link_swapped_in_after_the_check_is_not_followed(tmp_path: Path) -> None:
    """The state after a race: what was checked is replaced by a link before it is opened."""
    root, private = folders(tmp_path)
    roots = (root.resolve(),)
    checked = root.resolve() / "scan.png"  # the file was checked, then became a link
    checked.unlink()
    checked.symlink_to(private / "secret.png")
    with pytest.raises(OcrqError, match=r"^scan.png: cannot read: ") as final_link:
        open_checked(checked, "scan.png", roots)
    (root / "sub").mkdir()
    (root / "sub/secret.png").write_bytes(png(10, 10))
    checked = root.resolve() / "sub/secret.png"  # checked, then its folder became a link
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(private, target_is_directory=True)
    with pytest.raises(OutsideRoots):
        open_checked(checked, "sub/secret.png", roots)
    assert final_link.value.code is ErrorCode.INVALID_REQUEST
