"""Images as file:// URLs: read only under --allowed-local-media-path, refused as vLLM refuses."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fakevllm_requests import SIZE_PATTERN, chat_body, image_bytes, image_part

from ocrq.fakevllm.runner import FakeVllm
from ocrq.fakevllm.server import parse_args

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the module's fake was started with; a sibling folder holds outside files."""
    return tmp_path_factory.mktemp("media") / "allowed"


@pytest.fixture(scope="module")
def files_fake(allowed: Path) -> Iterator[FakeVllm]:
    """A fake started with --allowed-local-media-path (through the runner's keyword)."""
    allowed.mkdir()
    with FakeVllm(allowed_local_media_path=str(allowed)) as fake:
        yield fake


@pytest.fixture
def client(files_fake: FakeVllm, allowed: Path) -> Iterator[httpx.Client]:
    """A client on the module's fake, its allowed folder back as started."""
    files_fake.configure(allowed_local_media_path=str(allowed))
    with httpx.Client(base_url=files_fake.url, timeout=20.0) as c:
        yield c


def file_part(path: Path) -> dict[str, Any]:
    """An image_url part naming a local file."""
    return {"type": "image_url", "image_url": {"url": path.as_uri()}}


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def refusal(response: httpx.Response) -> str:
    """The message of a 400 in vLLM's error shape."""
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert (error["type"], error["code"]) == ("BadRequestError", 400)
    message: str = error["message"]
    return message


def test_the_allowed_path_flag_is_vllms_spelling() -> None:
    _, _, config = parse_args(["--allowed-local-media-path", "/dev/shm/ocrq"])
    assert config.allowed_local_media_path == "/dev/shm/ocrq"
    assert parse_args([])[2].allowed_local_media_path == ""  # local files refused by default


def test_a_file_under_the_allowed_folder_is_read_and_decoded_like_its_data_uri(
    client: httpx.Client, allowed: Path
) -> None:
    png = image_bytes(300, 200, fill=90)
    path = write(allowed / "job" / "p1.png", png)

    by_file = client.post(CHAT, json=chat_body([file_part(path)]))
    by_data = client.post(CHAT, json=chat_body([image_part(png)]))

    assert by_file.status_code == 200, by_file.text
    [found] = re.findall(SIZE_PATTERN, by_file.json()["choices"][0]["message"]["content"])
    assert found[2:4] == ("300", "200")
    assert by_file.json()["usage"] == by_data.json()["usage"]
    assert found == re.findall(SIZE_PATTERN, by_data.json()["choices"][0]["message"]["content"])[0]


def test_a_file_is_identified_by_its_content_not_its_name(
    client: httpx.Client, allowed: Path
) -> None:
    path = write(allowed / "named-png.png", image_bytes(120, 90, fmt="jpeg"))
    response = client.post(CHAT, json=chat_body([file_part(path)]))
    assert response.status_code == 200, response.text
    assert "120x90 px" in response.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("absent.png", None, "No such file or directory"),
        ("notes.png", b"just text, no image", "Failed to identify image"),
        ("cut.png", image_bytes(64, 48)[:60], "truncated or corrupt"),
    ],
    ids=["missing", "not-an-image", "truncated"],
)
def test_a_file_that_is_not_a_readable_image_is_refused(
    client: httpx.Client, allowed: Path, name: str, data: bytes | None, message: str
) -> None:
    path = allowed / name if data is None else write(allowed / name, data)
    assert message in refusal(client.post(CHAT, json=chat_body([file_part(path)])))


def test_a_file_outside_the_allowed_folder_is_refused_with_vllms_message(
    client: httpx.Client, allowed: Path
) -> None:
    outside = write(allowed.parent / "outside.png", image_bytes(64, 48))
    message = refusal(client.post(CHAT, json=chat_body([file_part(outside)])))
    assert message == (
        f"The file path {outside} must be a subpath of `--allowed-local-media-path` "
        f"{allowed.resolve()}."
    )


@pytest.mark.parametrize("escape", ["dotdot", "symlink", "the-folder-itself"])
def test_paths_that_only_look_inside_the_allowed_folder_are_refused(
    client: httpx.Client, allowed: Path, escape: str
) -> None:
    outside = write(allowed.parent / "secret.png", image_bytes(64, 48))
    if escape == "dotdot":
        url = f"file://{allowed}/../secret.png"
    elif escape == "symlink":
        link = allowed / "link.png"
        link.unlink(missing_ok=True)
        link.symlink_to(outside)
        url = link.as_uri()
    else:
        url = allowed.as_uri()
    body = chat_body([{"type": "image_url", "image_url": {"url": url}}])
    assert "must be a subpath of `--allowed-local-media-path`" in refusal(
        client.post(CHAT, json=body)
    )


def test_local_files_are_refused_when_no_folder_is_allowed(
    files_fake: FakeVllm, client: httpx.Client, allowed: Path
) -> None:
    path = write(allowed / "p.png", image_bytes(64, 48))
    files_fake.configure(allowed_local_media_path="")
    message = refusal(client.post(CHAT, json=chat_body([file_part(path)])))
    assert message == "Cannot load local files without `--allowed-local-media-path`."


def test_an_allowed_folder_that_does_not_exist_refuses_every_file(
    files_fake: FakeVllm, client: httpx.Client, allowed: Path
) -> None:
    path = write(allowed / "p.png", image_bytes(64, 48))
    files_fake.configure(allowed_local_media_path=str(allowed.parent / "nowhere"))
    message = refusal(client.post(CHAT, json=chat_body([file_part(path)])))
    assert message == (
        f"Invalid `--allowed-local-media-path`: The path {allowed.parent / 'nowhere'} "
        "does not exist."
    )


def test_traffic_counts_requests_body_bytes_and_images_until_reset(
    files_fake: FakeVllm, client: httpx.Client, allowed: Path
) -> None:
    files_fake.reset_traffic()
    path = write(allowed / "t.png", image_bytes(64, 48))
    bodies = [chat_body([file_part(path), file_part(path)]), chat_body([image_part(b"x")])]
    sent = [httpx.Request("POST", "http://x", json=b).content for b in bodies]
    statuses = [client.post(CHAT, content=body).status_code for body in sent]

    assert statuses == [200, 400]
    traffic = files_fake.traffic()
    expected = {"requests": 2, "request_bytes": sum(map(len, sent)), "images": 2, "structured": 0}
    assert traffic == expected
    files_fake.reset_traffic()
    assert files_fake.traffic() == {"requests": 0, "request_bytes": 0, "images": 0, "structured": 0}
