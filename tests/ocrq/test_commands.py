"""The client commands in-process against the real producer, and as a script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pymupdf
import pytest
from rich.console import Console
from support.documents import encrypted_pdf, png, sized_pdf
from support.invoices import EXPECTED, INVOICE_SCHEMA, invoice_pdf
from support.personal import form_pdf
from support.stack import Stack

from ocrq.cli.commands import main
from ocrq.cli.reports import FileReport, output_paths, summary_table
from ocrq.cli.submit import collect_files
from ocrq.client import Client
from ocrq.shared.schemas import Result

MakeProducer = Callable[..., str]


def summary_rows(stdout: str) -> list[dict[str, str]]:
    """The tab-separated summary (stdout is not a TTY under pytest) as dicts."""
    lines = [line.split("\t") for line in stdout.splitlines() if "\t" in line]
    assert lines and lines[0] == ["file", "job_id", "status", "pages", "seconds", "error"]
    return [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]


def write(path: Path, data: bytes) -> Path:
    """Write bytes, creating parent folders; the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_folders_are_walked_for_documents_by_content_and_named_files_kept(tmp_path: Path) -> None:
    pdf, image = sized_pdf([(50, 50)]), png(10, 10)
    for name, data in [
        ("b.pdf", pdf), ("sub/c.PNG", image), ("sub/deep/scan-0001", pdf),
        ("sub/notes.txt", b"words"), ("sub/fake.pdf", b"text wearing .pdf"),
        ("sub/.hidden.pdf", pdf), (".cache/d.pdf", pdf),
    ]:  # fmt: skip
        write(tmp_path / "in" / name, data)
    named = write(tmp_path / "odd.dat", b"x")
    found = collect_files([str(tmp_path / "in"), str(named)])
    relative = [p.relative_to(tmp_path).as_posix() for p in found]
    assert relative == ["in/b.pdf", "in/sub/c.PNG", "in/sub/deep/scan-0001", "odd.dat"]


def test_a_missing_input_is_reported() -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        collect_files(["/nowhere/at/all"])


def test_outputs_mirror_the_input_tree_and_keep_clashing_stems_apart(tmp_path: Path) -> None:
    files = [
        tmp_path / "a" / "page.png",
        tmp_path / "b" / "page.png",
        tmp_path / "scan.pdf",
        tmp_path / "scan.png",
        tmp_path / "solo.pdf",
    ]
    out = tmp_path / "out"
    names = [p.relative_to(out).as_posix() for p in output_paths(files, out, ".md")]
    assert names == ["a/page.md", "b/page.md", "scan.pdf.md", "scan.png.md", "solo.md"]


def test_one_folder_is_mirrored_from_its_own_root(tmp_path: Path) -> None:
    files = [tmp_path / "in" / "x.pdf", tmp_path / "in" / "sub" / "y.png"]
    out = tmp_path / "out"
    assert output_paths(files, out, ".json") == [out / "x.json", out / "sub" / "y.json"]


def test_the_summary_table_fits_80_columns_with_whole_job_ids() -> None:
    job_id = "Ab3_" * 5 + "xy"
    reports = [
        FileReport(Path("/very/long/folder/name/of/scans/2026/november/invoice-000123.pdf"),
                   job_id, "done", 12, 3.4),
        FileReport(Path("short.png"), job_id, "failed", 0, 0.2, "encrypted_document"),
    ]  # fmt: skip
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(summary_table(reports))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert sum(job_id in line for line in lines) == 2 and "error" not in lines[1]


def test_submit_without_wait_prints_job_ids_and_exits_0(
    api_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "in" / "one.png", png(20, 20))
    write(tmp_path / "in" / "sub" / "two.pdf", sized_pdf([(100, 100)]))
    code = main(["submit", str(tmp_path / "in"), "--url", api_url, "--lane", "batch"])
    rows = summary_rows(capsys.readouterr().out)
    assert code == 0
    assert [Path(r["file"]).name for r in rows] == ["one.png", "two.pdf"]
    with Client(api_url) as client:
        for row in rows:
            view = client.status(row["job_id"])
            assert row["status"] == view.status == "queued" and view.lane == "batch"
            assert view.filename == Path(row["file"]).name


def test_submit_exits_1_and_names_the_code_when_an_upload_is_rejected(
    api_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path / "good.png", png(20, 20))
    fake = write(tmp_path / "fake.pdf", b"this is text wearing a .pdf extension")
    code = main(["submit", str(good), str(fake), "--url", api_url])
    captured = capsys.readouterr()
    rows = {Path(r["file"]).name: r for r in summary_rows(captured.out)}
    assert code == 1
    assert rows["good.png"]["status"] == "queued" and rows["good.png"]["job_id"]
    assert rows["fake.pdf"]["status"] == "rejected" and rows["fake.pdf"]["job_id"] == ""
    assert rows["fake.pdf"]["error"] == "unsupported_media_type"
    assert "fake.pdf: unsupported_media_type" in captured.err


def test_submit_of_a_missing_path_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "/nowhere/at/all.pdf"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_bad_arguments_exit_2_without_raising(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "x.pdf", "--lane", "express"]) == 2
    assert "--lane" in capsys.readouterr().err


def test_status_prints_one_line_or_json_and_exits_1_when_unknown(
    api_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(api_url) as client:
        job = client.submit(png(20, 20), filename="note.png")
    assert main(["status", job.id, "--url", api_url]) == 0
    assert capsys.readouterr().out == f"{job.id}  queued  note.png\n"
    assert main(["status", job.id, "--json", "--url", api_url]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["id"] == job.id and view["status"] == "queued" and view["media_type"] == "image/png"
    assert main(["status", "no-such-job", "--url", api_url]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "not_found" in captured.err


def test_result_of_an_unfinished_job_exits_1_with_conflict(
    api_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(api_url) as client:
        job = client.submit(png(20, 20))
    assert main(["result", job.id, "--url", api_url]) == 1
    assert "conflict" in capsys.readouterr().err


def test_url_and_api_key_come_from_the_environment(
    make_producer: MakeProducer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = make_producer(api_keys="acme:key-acme")
    doc = write(tmp_path / "one.png", png(20, 20))
    monkeypatch.setenv("OCRQ_URL", url)
    monkeypatch.delenv("OCRQ_API_KEY", raising=False)
    assert main(["submit", str(doc)]) == 1
    assert summary_rows(capsys.readouterr().out)[0]["error"] == "unauthorized"
    monkeypatch.setenv("OCRQ_API_KEY", "key-acme")
    assert main(["submit", str(doc)]) == 0
    assert summary_rows(capsys.readouterr().out)[0]["status"] == "queued"


def test_the_console_script_submits_without_redrawing_a_progress_bar(
    api_url: str, tmp_path: Path
) -> None:
    doc = write(tmp_path / "one.png", png(20, 20))
    run = subprocess.run(
        [sys.executable, "-m", "ocrq.cli", "submit", str(doc), "--url", api_url],
        capture_output=True, text=True, timeout=60, env={**os.environ, "OCRQ_API_KEY": ""},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = summary_rows(run.stdout)
    assert len(rows) == 1 and rows[0]["file"] == str(doc) and rows[0]["status"] == "queued"
    assert "\r" not in run.stdout + run.stderr and "━" not in run.stdout + run.stderr
    with Client(api_url) as client:
        assert client.status(rows[0]["job_id"]).filename == "one.png"


@pytest.mark.slow
def test_submit_wait_out_writes_each_result_and_exits_1_when_one_is_encrypted(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    write(src / "a" / "page.png", png(110, 70))
    write(src / "b" / "page.png", png(130, 70))
    write(src / "scan.pdf", sized_pdf([(200, 300), (210, 300)]))
    write(src / "locked.pdf", encrypted_pdf())
    args = [str(src), "--wait", "--out", str(out), "--dpi", "72", "--concurrency", "2"]
    code = main(["submit", *args, "--url", stack.api])
    captured = capsys.readouterr()
    rows = {Path(r["file"]).relative_to(src).as_posix(): r for r in summary_rows(captured.out)}
    assert code == 1
    assert {k: r["status"] for k, r in rows.items()} == {
        "a/page.png": "done", "b/page.png": "done", "locked.pdf": "failed", "scan.pdf": "done",
    }  # fmt: skip
    assert rows["locked.pdf"]["error"] == "encrypted_document"
    assert rows["scan.pdf"]["pages"] == "2" and rows["a/page.png"]["pages"] == "1"
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["a/page.md", "b/page.md", "scan.md"]
    assert "110x70" in (out / "a" / "page.md").read_text()
    assert "130x70" in (out / "b" / "page.md").read_text()
    assert "210x300" in (out / "scan.md").read_text()
    assert "locked.pdf: encrypted_document" in captured.err


@pytest.mark.slow
def test_submit_extract_writes_the_fields_the_schema_names(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = write(tmp_path / "invoice.pdf", invoice_pdf())
    schema = write(tmp_path / "schema.json", json.dumps(INVOICE_SCHEMA).encode())
    out = tmp_path / "out"
    args = ["--extract", str(schema), "--text-layer", "auto", "--format", "fields"]
    assert main(["submit", str(doc), "--out", str(out), *args, "--url", stack.api]) == 0
    job_id = summary_rows(capsys.readouterr().out)[0]["job_id"]
    saved = json.loads((out / "invoice.fields.json").read_text())
    assert saved["values"]["total"] == 120.0 and saved["values"]["iban"] == EXPECTED["iban"]
    assert main(["result", job_id, "--format", "fields", "--url", stack.api]) == 0
    assert json.loads(capsys.readouterr().out) == saved


@pytest.mark.slow
def test_submit_redact_masks_the_kinds_and_patterns_named_in_every_file_written(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = write(tmp_path / "form.pdf", form_pdf())
    args = ["--redact", "email,iban", "--redact-pattern", r"Jane\s+Roe", "--text-layer", "auto"]
    for fmt in ("markdown", "pdf"):
        out = tmp_path / fmt
        assert main(["submit", str(doc), *args, "--out", str(out), "--format", fmt,
                     "--url", stack.api]) == 0  # fmt: skip
    markdown = (tmp_path / "markdown" / "form.md").read_text()
    assert "[EMAIL]" in markdown and "[IBAN]" in markdown and "[REDACTED]" in markdown
    assert "Jane" not in markdown and "+44 117 496 0123" in markdown  # phone: not asked
    layer = "".join(p.get_text() for p in pymupdf.open(tmp_path / "pdf" / "form.pdf"))
    assert "jane.roe@example.org" not in layer and "Jane" not in layer
    assert "Harbourside" in layer
    capsys.readouterr()


def test_extract_of_a_file_that_is_not_json_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = write(tmp_path / "invoice.pdf", invoice_pdf())
    schema = write(tmp_path / "schema.json", b"{not json")
    assert main(["submit", str(doc), "--extract", str(schema)]) == 2
    assert "is not JSON" in capsys.readouterr().err


@pytest.mark.slow
def test_json_results_and_the_result_command_return_the_finished_job(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = write(tmp_path / "scan.pdf", sized_pdf([(200, 300)]))
    out = tmp_path / "out"
    assert main(["submit", str(doc), "--out", str(out), "--format", "json", "--dpi", "72",
                 "--url", stack.api]) == 0  # fmt: skip
    job_id = summary_rows(capsys.readouterr().out)[0]["job_id"]
    saved = msgspec.json.decode((out / "scan.json").read_bytes(), type=Result)
    assert saved.id == job_id and saved.page_count == 1 and saved.pages[0].width == 200

    assert main(["result", job_id, "--url", stack.api]) == 0
    assert capsys.readouterr().out == saved.markdown.rstrip("\n") + "\n"
    target = tmp_path / "again.json"
    assert (
        main(["result", job_id, "--format", "json", "--out", str(target), "--url", stack.api]) == 0
    )
    assert msgspec.json.decode(target.read_bytes(), type=Result) == saved
    assert main(["status", job_id, "--json", "--url", stack.api]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "done"


@pytest.mark.slow
def test_wait_cancel_rm_and_ls_act_on_jobs_by_id(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(stack.api) as client:
        first = client.submit(png(40, 30), filename="first.png")
        second = client.submit(png(50, 30), filename="second.png")
    assert main(["cancel", second.id, "--url", stack.api]) == 0
    assert capsys.readouterr().out == f"{second.id}  cancelled\n"
    stack.start_worker()
    assert main(["wait", first.id, second.id, "--url", stack.api]) == 1  # one was cancelled
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{first.id}  done  1/1 pages  first.png"
    assert lines[1].startswith(f"{second.id}  cancelled  second.png  cancelled:")
    assert main(["ls", "--url", stack.api]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == [second.id, first.id]
    assert main(["cancel", "no-such-job", "--url", stack.api]) == 1
    assert "not_found" in capsys.readouterr().err
    assert main(["rm", first.id, "--url", stack.api]) == 0
    assert capsys.readouterr().out == f"{first.id}  deleted\n"
    assert main(["status", first.id, "--url", stack.api]) == 1


@pytest.mark.slow
def test_a_folder_as_one_batch_follows_it_and_saves_each_result(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    write(src / "a" / "page.png", png(110, 70))
    write(src / "scan.pdf", sized_pdf([(200, 300), (210, 300)]))
    write(src / "locked.pdf", encrypted_pdf())
    code = main(["submit", str(src), "--batch", "--out", str(out), "--dpi", "72",
                 "--url", stack.api])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1, captured  # the encrypted one failed
    assert "3 accepted, 0 refused" in captured.out
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["a/page.md", "scan.md"]
    assert "210x300" in (out / "scan.md").read_text()
    assert "locked.pdf: encrypted_document" in captured.err


@pytest.mark.slow
def test_a_zip_as_one_batch_names_outputs_after_its_members(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import zipfile

    archive = tmp_path / "scans.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("one.png", png(120, 80))
        z.writestr("two.png", png(130, 80))
    out = tmp_path / "out"
    assert main(["submit", str(archive), "--batch", "--out", str(out), "--url", stack.api]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["one.md", "two.md"]
    assert "130x80" in (out / "two.md").read_text()


@pytest.mark.slow
def test_usage_prints_the_days_jobs_and_pages_as_lines_json_and_csv(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(stack.api) as client:
        job = client.submit(sized_pdf([(60, 40), (60, 40)]), filename="two.pdf")
        stack.start_worker()
        assert client.wait(job.id).status == "done"
        report = client.usage()
    assert (report.totals.jobs, report.totals.pages) == (1, 2)
    assert main(["usage", "--url", stack.api]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [cells[:5] for cells in lines] == [[report.days[-1].day, "1", "0", "0", "2"],
                                             ["total", "1", "0", "0", "2"]]  # fmt: skip
    assert main(["usage", "--json", "--from", report.days[-1].day, "--url", stack.api]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["pages"] == 2
    assert main(["usage", "--csv", "--from", report.days[-1].day, "--url", stack.api]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("day,jobs,failed,cancelled,pages") and len(rows) == 2
    assert main(["usage", "--from", "2026-13-01", "--url", stack.api]) == 1
    assert "invalid_request" in capsys.readouterr().err
