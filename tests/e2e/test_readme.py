"""Every README example marked runnable works as written, pasted into a shell, on a live stack.

A block is marked with the info string ``sh runnable`` or ``python runnable``. The test
runs them in README order in a folder holding the files the examples name (scan.pdf,
page.png, report.pdf, scans/); ``localhost:8000`` becomes the test producer's address and
``JOB_ID`` a job that has just finished (or, in a block that cancels, one still running).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest
from support.documents import png, sized_pdf
from support.invoices import invoice_pdf
from support.stack import Stack

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```(sh|python) runnable\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ERROR_BODY = re.compile(r'"code":\s*"(?!cancelled)\w+"')  # an API error answered anywhere


def runnable_blocks() -> list[tuple[str, str]]:
    """(language, code) of every block marked runnable, in README order."""
    return BLOCK.findall(README.read_text())


def sample_files(folder: Path) -> None:
    """The documents the examples name."""
    (folder / "scans" / "sub").mkdir(parents=True)
    (folder / "scan.pdf").write_bytes(sized_pdf([(300, 400)]))
    (folder / "report.pdf").write_bytes(sized_pdf([(300, 400), (400, 300)]))
    (folder / "page.png").write_bytes(png(200, 120))
    (folder / "invoice.pdf").write_bytes(invoice_pdf())
    (folder / "scans" / "a.pdf").write_bytes(sized_pdf([(250, 250)]))
    (folder / "scans" / "sub" / "b.png").write_bytes(png(150, 90))
    with zipfile.ZipFile(folder / "scans.zip", "w") as archive:
        archive.writestr("z1.png", png(160, 90))
        archive.writestr("z2.pdf", sized_pdf([(200, 200)]))


def finished_batch(stack: Stack) -> str:
    """A batch of one document, waited for until it has finished."""
    files = [("file", ("b.png", png(90, 60), "image/png"))]
    batch_id: str = httpx.post(f"{stack.api}/v1/batches", files=files).json()["id"]
    stack.wait_for_batch(batch_id, timeout_s=60)
    return batch_id


def test_the_readme_has_runnable_examples_of_each_kind() -> None:
    kinds = [language for language, _ in runnable_blocks()]
    assert kinds.count("sh") >= 4 and kinds.count("python") >= 1


def run_block(language: str, code: str, folder: Path, env: dict[str, str]) -> str:
    """Run one block as a user would paste it; its output (fails the test on exit != 0)."""
    command = ["bash", "-euo", "pipefail", "-c", code] if language == "sh" else [
        sys.executable, "-c", code
    ]  # fmt: skip
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_every_runnable_readme_example_works_on_a_live_stack(stack: Stack, tmp_path: Path) -> None:
    stack.start_worker()
    folder = tmp_path / "user"
    folder.mkdir()
    sample_files(folder)
    address = stack.api.removeprefix("http://")
    bin_dir = str(Path(sys.executable).parent)  # where `pip install` put the ocrq script
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OCRQ_URL": stack.api}
    env.pop("OCRQ_API_KEY", None)
    for language, code in runnable_blocks():
        cancels = "JOB_ID" in code and ("/cancel" in code or "ocrq cancel" in code)
        stack.fake.configure(latency_s=30.0 if cancels else 0.0)
        job_id = stack.submit(png(120, 80))
        if cancels:
            stack.wait_for_status(job_id, "processing", timeout_s=30)
        else:
            stack.wait(job_id)
        code = code.replace("JOB_ID", job_id)
        if "BATCH_ID" in code:
            code = code.replace("BATCH_ID", finished_batch(stack))
        code = code.replace("http://127.0.0.1:8000", stack.api).replace("localhost:8000", address)
        out = run_block(language, code, folder, env)
        assert not ERROR_BODY.search(out), f"{code}\n--- an API error in the output:\n{out}"
    assert (folder / "results" / "scans" / "a.md").is_file()
    assert (folder / "results" / "scans" / "sub" / "b.md").is_file()
    assert (folder / "results" / "report.md").is_file()
    assert "120x80" in (folder / "page.md").read_text()  # `ocrq result JOB_ID > page.md`
