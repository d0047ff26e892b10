"""`ocrq submit` over the upload path and by reference, its byte counter, and `ocrq up
--blob-dir` (the folder store it hands to the producer and the workers)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from support.documents import png

from ocrq.cli.commands import main
from ocrq.cli.submit import Board
from ocrq.cli.up import child_env, parse_args
from ocrq.client import Client
from ocrq.shared.settings import load_settings

MakeProducer = Callable[..., str]


def summary_rows(stdout: str) -> list[dict[str, str]]:
    """The tab-separated summary (stdout is not a TTY under pytest) as dicts."""
    lines = [line.split("\t") for line in stdout.splitlines() if "\t" in line]
    assert lines and lines[0] == ["file", "job_id", "status", "pages", "seconds", "error"]
    return [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]


def test_submit_sends_a_big_file_by_upload_and_a_small_one_inline(
    make_producer: MakeProducer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "blobs"
    url = make_producer(blob_url=store.as_uri(), inline_max_bytes="4096")
    big, small = tmp_path / "big.png", tmp_path / "small.png"
    big.write_bytes(png(10, 10) + b"\0" * 200_000)
    small.write_bytes(png(10, 10))
    assert main(["submit", str(big), str(small), "--url", url, "--dpi", "120"]) == 0
    rows = {Path(r["file"]).name: r for r in summary_rows(capsys.readouterr().out)}
    assert {r["status"] for r in rows.values()} == {"queued"}
    uploaded = rows["big.png"]["job_id"]
    assert (store / "uploads" / "public" / uploaded).stat().st_size == big.stat().st_size
    with Client(url) as client:
        assert client.status(uploaded).options.dpi == 120
        assert client.status(rows["small.png"]["job_id"]).filename == "small.png"


def test_a_source_the_producer_refuses_is_reported_by_its_code(
    make_producer: MakeProducer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_producer(blob_url=(tmp_path / "blobs").as_uri())
    code = main(["submit", "--source", "https://127.0.0.1:1/scan.pdf", "--url", url])
    (row,) = summary_rows(capsys.readouterr().out)
    assert code == 1 and row["file"] == "https://127.0.0.1:1/scan.pdf"
    assert row["status"] == "rejected" and row["error"]  # a private address: never fetched


def test_a_source_must_be_an_s3_key_or_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "--source", "tenants/acme/a.pdf"]) == 2
    assert "s3://bucket/key" in capsys.readouterr().err
    assert main(["submit"]) == 2  # neither files nor sources


def test_the_byte_counter_follows_each_file_and_restarts_a_retried_one() -> None:
    board = Board(Console(file=None, force_terminal=False), 2, False, total_bytes=300)
    first, second = board.sending(Path("a")), board.sending(Path("b"))
    first(100, 200)
    second(50, 100)
    first(200, 200)
    assert board.sent_bytes == 250
    second(20, 100)  # a 503, and the upload begins again
    second(100, 100)
    assert board.sent_bytes == 300


def test_up_blob_dir_creates_the_folder_and_hands_it_to_every_process(tmp_path: Path) -> None:
    folder = tmp_path / "not" / "yet"
    args = parse_args(["--blob-dir", str(folder), "--workers", "2"])
    env = child_env(args, "redis://127.0.0.1:1/0")
    assert folder.is_dir()
    assert env["OCRQ_BLOB_URL"] == folder.resolve().as_uri()
    settings = load_settings(env)
    assert settings.blobs.enabled and settings.blobs.blob_url.startswith("file:///")


def test_up_without_blob_dir_stays_redis_only() -> None:
    env = child_env(parse_args([]), "redis://127.0.0.1:1/0")
    assert "OCRQ_BLOB_URL" not in env


def test_up_names_a_blob_dir_it_cannot_make(tmp_path: Path) -> None:
    taken = tmp_path / "file"
    taken.write_text("")
    with pytest.raises(RuntimeError, match="--blob-dir"):
        child_env(parse_args(["--blob-dir", str(taken / "sub")]), "redis://127.0.0.1:1/0")
