"""Scratch folders: one per stack and worker, fresh per job, gone on every exit, swept safely."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest

from ocrq.consumer.workspace import (
    OWNER_FILE,
    Owner,
    claim_worker_folder,
    current_owner,
    job_workspace,
    read_owner,
    shm_base,
    stack_id,
    stack_root,
    sweep_stale,
)


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return int(child.stdout)


def _worker_folder(root: Path, name: str, owner: Owner | None) -> Path:
    folder = root / name
    (folder / "job-1").mkdir(parents=True)
    (folder / "job-1" / "page-0001.png").write_bytes(b"left over")
    if owner is not None:
        (folder / OWNER_FILE).write_bytes(msgspec.json.encode(owner))
    return folder


def test_job_workspace_is_created_then_removed_on_normal_exit(tmp_path: Path) -> None:
    with job_workspace(tmp_path, "job-a") as folder:
        assert folder == tmp_path / "job-a" and folder.is_dir()
        (folder / "page-0001.png").write_bytes(b"x")
    assert not folder.exists()


def test_job_workspace_is_removed_when_the_body_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), job_workspace(tmp_path, "job-b") as folder:
        (folder / "document").write_bytes(b"x")
        raise RuntimeError("boom")
    assert not folder.exists()


def test_job_workspace_starts_empty_when_an_earlier_attempt_left_files(tmp_path: Path) -> None:
    (tmp_path / "job-c").mkdir()
    (tmp_path / "job-c" / "stale.png").write_bytes(b"x")
    with job_workspace(tmp_path, "job-c") as folder:
        assert list(folder.iterdir()) == []


@pytest.mark.parametrize("job_id", ["..", "../escape", "a/b", ""])
def test_job_workspace_refuses_ids_that_escape_the_root(tmp_path: Path, job_id: str) -> None:
    with pytest.raises(ValueError, match="unsafe"), job_workspace(tmp_path, job_id):
        pass


def test_each_stack_gets_its_own_folder_by_redis_url_and_prefix(tmp_path: Path) -> None:
    a = stack_root(str(tmp_path), "redis://127.0.0.1:6379/0", "ocrq:")
    b = stack_root(str(tmp_path), "redis://127.0.0.1:6380/0", "ocrq:")
    c = stack_root(str(tmp_path), "redis://127.0.0.1:6379/0", "other:")
    assert len({a, b, c}) == 3 and all(p.parent == tmp_path / "ocrq" for p in (a, b, c))
    assert a == stack_root(str(tmp_path), "redis://127.0.0.1:6379/0", "ocrq:")
    assert a.name == stack_id("redis://127.0.0.1:6379/0", "ocrq:")
    assert a.stat().st_mode & 0o777 == 0o700


def test_a_worker_folder_names_its_owner_process(tmp_path: Path) -> None:
    folder = claim_worker_folder(tmp_path, "w1")
    assert read_owner(folder) == current_owner()
    assert current_owner().pid == os.getpid()


def test_claiming_a_dead_namesakes_folder_clears_its_files(tmp_path: Path) -> None:
    dead = Owner(host=current_owner().host, boot=current_owner().boot, pid=_dead_pid(), started=1)
    _worker_folder(tmp_path, "pod-7", dead)
    folder = claim_worker_folder(tmp_path, "pod-7")
    assert sorted(p.name for p in folder.iterdir()) == [OWNER_FILE]


def test_a_worker_name_held_by_a_live_process_is_refused(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as other:
        try:
            _worker_folder(tmp_path, "w1", current_owner(other.pid))
            with pytest.raises(RuntimeError, match="in use by pid"):
                claim_worker_folder(tmp_path, "w1")
        finally:
            other.kill()


def test_sweep_removes_the_folder_of_a_dead_process_on_this_host(tmp_path: Path) -> None:
    me = current_owner()
    dead = _worker_folder(tmp_path, "w-dead", Owner(me.host, me.boot, _dead_pid(), 1))
    assert sweep_stale(tmp_path) == [dead]
    assert not dead.exists()


def test_sweep_keeps_the_folder_of_a_live_process(tmp_path: Path) -> None:
    live = _worker_folder(tmp_path, "w-live", current_owner())
    assert sweep_stale(tmp_path) == []
    assert (live / "job-1" / "page-0001.png").exists()


def test_sweep_removes_a_pid_reused_by_a_newer_process(tmp_path: Path) -> None:
    # A containerised worker is pid 1 after every restart: the pid is alive, its start differs.
    me = current_owner()
    assert me.started is not None, "this test needs /proc"
    old = _worker_folder(tmp_path, "pod-1", Owner(me.host, me.boot, me.pid, me.started - 1))
    assert sweep_stale(tmp_path) == [old]


def test_sweep_removes_folders_from_before_a_reboot(tmp_path: Path) -> None:
    me = current_owner()
    old = _worker_folder(tmp_path, "w-old", Owner(me.host, "another-boot", me.pid, me.started))
    assert sweep_stale(tmp_path) == [old]


def test_sweep_keeps_other_hosts_and_folders_without_an_owner(tmp_path: Path) -> None:
    me = current_owner()
    others = [
        _worker_folder(tmp_path, "w-elsewhere", Owner("elsewhere", me.boot, _dead_pid(), 1)),
        _worker_folder(tmp_path, "w-unknown", None),
    ]
    assert sweep_stale(tmp_path) == []
    assert all(folder.exists() for folder in others)


def test_sweep_of_a_missing_root_removes_nothing(tmp_path: Path) -> None:
    assert sweep_stale(tmp_path / "absent") == []


def test_shm_base_is_an_ocrq_folder_inside_a_writable_shm_dir(tmp_path: Path) -> None:
    assert shm_base(str(tmp_path)) == tmp_path / "ocrq"


def test_shm_base_falls_back_to_the_temp_dir_when_shm_dir_is_missing(tmp_path: Path) -> None:
    expected = Path(tempfile.gettempdir()) / "ocrq-shm"
    assert shm_base(str(tmp_path / "no-such-shm")) == expected


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only folder")
def test_shm_base_falls_back_when_shm_dir_is_not_writable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert shm_base(str(locked)) == Path(tempfile.gettempdir()) / "ocrq-shm"
