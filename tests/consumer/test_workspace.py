"""Per-job scratch folders: fresh on entry, gone on every exit, swept after a crash."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from consumer.workspace import job_workspace, shm_root, sweep_stale


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return int(child.stdout)


def _worker_folder(root: Path, name: str) -> Path:
    folder = root / name / "job-1"
    folder.mkdir(parents=True)
    (folder / "page-0001.png").write_bytes(b"left over")
    return folder.parent


def test_job_workspace_is_created_then_removed_on_normal_exit(tmp_path: Path) -> None:
    with job_workspace(tmp_path, "w1", "job-a") as folder:
        assert folder == tmp_path / "w1" / "job-a"
        assert folder.is_dir()
        (folder / "page-0001.png").write_bytes(b"x")
    assert not folder.exists()


def test_job_workspace_is_removed_when_the_body_raises(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="boom"),
        job_workspace(tmp_path, "w1", "job-b") as folder,
    ):
        (folder / "page-0001.png").write_bytes(b"x")
        raise RuntimeError("boom")
    assert not folder.exists()


def test_job_workspace_starts_empty_when_an_earlier_attempt_left_files(tmp_path: Path) -> None:
    stale = tmp_path / "w1" / "job-c"
    stale.mkdir(parents=True)
    (stale / "page-0009.png").write_bytes(b"old")
    with job_workspace(tmp_path, "w1", "job-c") as folder:
        assert list(folder.iterdir()) == []


@pytest.mark.parametrize("job_id", ["..", "../escape", "a/b", ""])
def test_job_workspace_refuses_ids_that_escape_the_root(tmp_path: Path, job_id: str) -> None:
    with pytest.raises(ValueError, match="unsafe"), job_workspace(tmp_path, "w1", job_id):
        pass


def test_sweep_removes_the_folder_of_a_dead_process_on_this_host(tmp_path: Path) -> None:
    dead = _worker_folder(tmp_path, f"{socket.gethostname()}-{_dead_pid()}-a1b2c3")
    assert sweep_stale(tmp_path) == [dead]
    assert not dead.exists()


def test_sweep_keeps_the_folder_of_a_live_process(tmp_path: Path) -> None:
    live = _worker_folder(tmp_path, f"{socket.gethostname()}-{os.getpid()}-a1b2c3")
    assert sweep_stale(tmp_path) == []
    assert (live / "job-1" / "page-0001.png").exists()


def test_sweep_keeps_other_hosts_and_unparseable_folders(tmp_path: Path) -> None:
    pid = _dead_pid()
    others = [
        _worker_folder(tmp_path, f"{socket.gethostname()}x-{pid}-a1b2c3"),
        _worker_folder(tmp_path, f"elsewhere-{pid}-a1b2c3"),
        _worker_folder(tmp_path, "custom-worker-name"),
    ]
    dead = _worker_folder(tmp_path, f"{socket.gethostname()}-{pid}")
    assert sweep_stale(tmp_path) == [dead]
    assert all(folder.exists() for folder in others)


def test_sweep_of_a_missing_root_removes_nothing(tmp_path: Path) -> None:
    assert sweep_stale(tmp_path / "absent") == []


def test_shm_root_is_an_ocrq_folder_inside_a_writable_shm_dir(tmp_path: Path) -> None:
    root = shm_root(str(tmp_path))
    assert root == tmp_path / "ocrq"
    assert root.is_dir()


def test_shm_root_falls_back_to_the_temp_dir_when_shm_dir_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    root = shm_root(str(tmp_path / "no-such-shm"))
    assert root == temp / "ocrq-shm"
    assert root.is_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_shm_root_falls_back_when_shm_dir_is_not_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert shm_root(str(locked)) == temp / "ocrq-shm"
