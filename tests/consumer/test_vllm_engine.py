"""The vLLM engine: exact request bodies, and real HTTP against the fake vLLM server."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pymupdf
import pytest

from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.vllm import (
    PageHandoffError,
    VllmEngine,
    blank_png,
    build_request,
    chat_completions_url,
    data_uri,
)
from ocrq.fakevllm.runner import FakeVllm, free_port
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.profiles import get_profile
from ocrq.shared.settings import Settings, settings_of

DEEPSEEK_MODEL = "deepseek-ai/DeepSeek-OCR"


def render_page(folder: Path, number: int, width: int, height: int, fmt: str = "png") -> PageImage:
    """A real image file of the given size, shaded per page so each page decodes differently."""
    # PyMuPDF ships without annotations for these calls.
    rect = pymupdf.IRect(0, 0, width, height)  # type: ignore[no-untyped-call]
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, rect, False)  # type: ignore[no-untyped-call]
    pixmap.clear_with(40 * number % 256)  # type: ignore[no-untyped-call]
    path = folder / f"page-{number}.{fmt}"
    path.write_bytes(pixmap.tobytes(fmt))  # type: ignore[no-untyped-call]
    media_type = "image/png" if fmt == "png" else "image/jpeg"
    return PageImage(
        number=number, path=str(path), media_type=media_type, width=width, height=height
    )


def make_engine(client: httpx.AsyncClient, url: str, **settings: Any) -> VllmEngine:
    return VllmEngine(
        settings_of(**{"vllm_url": url, "engine_timeout_s": 20.0, **settings}), client
    )


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


# --- the request body -----------------------------------------------------------------------


def test_request_for_one_page_is_exactly_the_unlimited_ocr_protocol() -> None:
    body = build_request(get_profile("unlimited-ocr"), "baidu/Unlimited-OCR", ["data:A"], 0)

    assert body == {
        "model": "baidu/Unlimited-OCR",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<image>document parsing."},
                    {"type": "image_url", "image_url": {"url": "data:A"}},
                ],
            }
        ],
        "temperature": 0,
        "max_tokens": 8192,
        "skip_special_tokens": False,
        "vllm_xargs": {"ngram_size": 35, "window_size": 128},
    }


def test_request_for_four_pages_uses_the_multi_page_prompt_window_and_budget() -> None:
    uris = ["data:A", "data:B", "data:C", "data:D"]

    body = build_request(get_profile("unlimited-ocr"), "baidu/Unlimited-OCR", uris, 0)

    assert body == {
        "model": "baidu/Unlimited-OCR",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<image>Multi page parsing."},
                    {"type": "image_url", "image_url": {"url": "data:A"}},
                    {"type": "image_url", "image_url": {"url": "data:B"}},
                    {"type": "image_url", "image_url": {"url": "data:C"}},
                    {"type": "image_url", "image_url": {"url": "data:D"}},
                ],
            }
        ],
        "temperature": 0,
        "max_tokens": 16384,
        "skip_special_tokens": False,
        "vllm_xargs": {"ngram_size": 35, "window_size": 1024},
    }


def test_request_for_deepseek_ocr_uses_its_grounding_prompt_and_ngram_settings() -> None:
    body = build_request(get_profile("deepseek-ocr"), DEEPSEEK_MODEL, ["data:A"], 0)

    assert body == {
        "model": DEEPSEEK_MODEL,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "<image>\n<|grounding|>Convert the document to markdown.",
                    },
                    {"type": "image_url", "image_url": {"url": "data:A"}},
                ],
            }
        ],
        "temperature": 0,
        "max_tokens": 8192,
        "skip_special_tokens": False,
        "vllm_xargs": {
            "ngram_size": 30,
            "window_size": 90,
            "whitelist_token_ids": [128821, 128822],
        },
    }


def test_max_tokens_setting_overrides_the_profile_budget() -> None:
    body = build_request(get_profile("unlimited-ocr"), "m", ["data:A", "data:B"], 3000)

    assert body["max_tokens"] == 3000


@pytest.mark.parametrize(
    "url",
    ["http://h:8001", "http://h:8001/", "http://h:8001/v1", "http://h:8001/v1/", " http://h:8001 "],
)
def test_server_root_with_or_without_v1_reaches_the_chat_endpoint(url: str) -> None:
    assert chat_completions_url(url) == "http://h:8001/v1/chat/completions"


@pytest.mark.parametrize("url", ["127.0.0.1:8001", "ftp://h/", "http://", "http://:8001"])
def test_server_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="OCRQ_VLLM_URL"):
        chat_completions_url(url)


def test_data_uri_carries_the_page_media_type_and_its_bytes(tmp_path: Path) -> None:
    page = render_page(tmp_path, 1, 40, 30, fmt="jpeg")

    uri = data_uri(page)

    prefix = "data:image/jpeg;base64,"
    assert uri.startswith(prefix)
    assert base64.b64decode(uri[len(prefix) :]) == Path(page.path).read_bytes()


# --- against the fake vLLM -----------------------------------------------------------------


async def test_engine_sends_the_built_request_with_the_page_files(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    page = render_page(tmp_path, 1, 640, 480)

    await make_engine(client, fake.url).recognise([page])

    expected = build_request(
        get_profile("unlimited-ocr"), "baidu/Unlimited-OCR", [data_uri(page)], 0
    )
    assert fake.requests() == [expected]


async def test_single_page_result_names_the_page_size_and_scales_boxes_to_it(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    page = render_page(tmp_path, 5, 640, 480)

    output = await make_engine(client, fake.url).recognise([page])

    [result] = output.pages
    assert (result.number, result.width, result.height) == (5, 640, 480)
    assert result.markdown is not None
    assert result.markdown.startswith("# Page 640\u00d7480")
    assert "<|" not in result.markdown
    assert [b.label for b in result.blocks] == [
        *("page_header", "page_number", "title", "heading", "text", "table"),
        *("figure", "caption"),
    ]
    [figure] = [b for b in result.blocks if b.label == "figure"]
    assert figure.bbox_px == [0, 288, 640, 480]
    assert output.segments == []
    assert result.truncated is False
    assert output.usage.requests == 1
    assert output.usage.prompt_tokens > 0
    assert output.usage.completion_tokens > 0


async def test_three_pages_give_one_segment_and_pages_without_markdown(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    pages = [render_page(tmp_path, n, 300 + 100 * n, 200) for n in (1, 2, 3)]

    output = await make_engine(client, fake.url).recognise(pages)

    assert [(p.number, p.width, p.height) for p in output.pages] == [
        (1, 400, 200),
        (2, 500, 200),
        (3, 600, 200),
    ]
    assert all(p.markdown is None and p.blocks == [] for p in output.pages)
    [segment] = output.segments
    assert (segment.first_page, segment.last_page, segment.truncated) == (1, 3, False)
    for n, width in ((1, 400), (2, 500), (3, 600)):
        assert segment.markdown.count(f"# Page {width}\u00d7200") == 1
        assert segment.markdown.count(f"image {n} of 3") == 1
    assert "<|" not in segment.markdown
    [request] = fake.requests()
    assert request["vllm_xargs"] == {"ngram_size": 35, "window_size": 1024}
    assert request["max_tokens"] == 16384
    assert output.usage.requests == 1


async def test_segment_spans_the_page_numbers_it_was_given(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    pages = [render_page(tmp_path, n, 100, 100) for n in (7, 8)]

    output = await make_engine(client, fake.url).recognise(pages)

    assert [(s.first_page, s.last_page) for s in output.segments] == [(7, 8)]


async def test_server_url_with_v1_suffix_works(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    output = await make_engine(client, fake.url + "/v1/").recognise(
        [render_page(tmp_path, 1, 100, 100)]
    )

    assert output.pages[0].markdown


async def test_max_tokens_setting_reaches_the_server(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    await make_engine(client, fake.url, max_tokens=2000).recognise(
        [render_page(tmp_path, 1, 100, 100)]
    )

    assert [r["max_tokens"] for r in fake.requests()] == [2000]


async def test_length_finish_marks_a_single_page_truncated(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(truncate_next=1)

    output = await make_engine(client, fake.url).recognise([render_page(tmp_path, 1, 100, 100)])

    assert output.pages[0].truncated is True
    assert "<|" not in (output.pages[0].markdown or "")


async def test_length_finish_marks_a_multi_page_segment_truncated(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(truncate_next=1)
    pages = [render_page(tmp_path, n, 100, 100) for n in (1, 2)]

    output = await make_engine(client, fake.url).recognise(pages)

    assert [s.truncated for s in output.segments] == [True]


async def test_server_error_503_is_engine_unavailable(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(fail_next=1)

    with pytest.raises(OcrqError) as caught:
        await make_engine(client, fake.url).recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert caught.value.transient
    assert "503" in caught.value.message


async def test_server_error_500_is_engine_unavailable(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(fail_next=1, fail_status=500)

    with pytest.raises(OcrqError) as caught:
        await make_engine(client, fake.url).recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE


async def test_model_still_loading_is_engine_unavailable(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(slow_start_s=60.0)

    with pytest.raises(OcrqError) as caught:
        await make_engine(client, fake.url).recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert "loading" in caught.value.message


async def test_dropped_connection_is_engine_unavailable(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(drop_next=1)

    with pytest.raises(OcrqError) as caught:
        await make_engine(client, fake.url).recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE


async def test_hung_request_is_a_timeout(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    fake.configure(hang_next=1)
    engine = make_engine(client, fake.url, engine_timeout_s=0.5)

    with pytest.raises(OcrqError) as caught:
        await engine.recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.transient


async def test_prompt_beyond_max_model_len_is_engine_error_with_vllm_message(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    engine = make_engine(client, fake.url, max_tokens=40_000)

    with pytest.raises(OcrqError) as caught:
        await engine.recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_ERROR
    assert not caught.value.transient
    assert "maximum context length is 32768" in caught.value.message


async def test_unknown_model_is_engine_error(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    engine = make_engine(client, fake.url, vllm_model="no/such-model")

    with pytest.raises(OcrqError) as caught:
        await engine.recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_ERROR
    assert "no/such-model" in caught.value.message


async def test_nothing_listening_is_engine_unavailable(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    engine = make_engine(client, f"http://127.0.0.1:{free_port()}")

    with pytest.raises(OcrqError) as caught:
        await engine.recognise([render_page(tmp_path, 1, 100, 100)])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert "ConnectError" in caught.value.message


async def test_unknown_profile_fails_before_any_request(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    with pytest.raises(OcrqError) as caught:
        await make_engine(client, fake.url).recognise(
            [render_page(tmp_path, 1, 100, 100)], profile="nope"
        )

    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert fake.requests() == []


async def test_no_pages_sends_no_request(fake: FakeVllm, client: httpx.AsyncClient) -> None:
    output = await make_engine(client, fake.url).recognise([])

    assert (output.pages, output.segments, fake.requests()) == ([], [], [])


async def test_missing_page_file_is_an_internal_error(
    fake: FakeVllm, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    page = PageImage(
        number=1, path=str(tmp_path / "gone.png"), media_type="image/png", width=1, height=1
    )

    with pytest.raises(OcrqError) as caught:
        await make_engine(client, fake.url).recognise([page])

    assert caught.value.code is ErrorCode.INTERNAL
    assert fake.requests() == []


async def test_aclose_leaves_the_shared_client_open(
    fake: FakeVllm, client: httpx.AsyncClient
) -> None:
    engine = make_engine(client, fake.url)

    await engine.aclose()

    assert not client.is_closed
    assert (engine.name, engine.model, engine.profile) == (
        "vllm",
        "baidu/Unlimited-OCR",
        "unlimited-ocr",
    )


async def test_engine_refuses_to_start_without_a_url(client: httpx.AsyncClient) -> None:
    with pytest.raises(ValueError, match="OCRQ_VLLM_URL"):
        VllmEngine(Settings(), client)


async def test_deepseek_profile_reads_a_999_scale_from_a_deepseek_server(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    page = render_page(tmp_path, 1, 640, 480)

    async with FakeVllm(protocol="deepseek-ocr", model=DEEPSEEK_MODEL) as fake:
        engine = make_engine(client, fake.url, vllm_model=DEEPSEEK_MODEL, profile="deepseek-ocr")
        output = await engine.recognise([page])
        [request] = await asyncio.to_thread(fake.requests)

    assert request["vllm_xargs"]["window_size"] == 90
    # The figure reaches the far corner: 999/999 of the page, not 999/1000 of it.
    [figure] = [b for b in output.pages[0].blocks if b.label == "figure"]
    assert figure.bbox_px == [0, 288, 640, 480]


# --- against a canned HTTP server (statuses the fake does not produce) ----------------------


class CannedServer:
    """A one-answer HTTP/1.1 server on 127.0.0.1 that records request headers."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        self.headers: list[dict[str, str]] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> CannedServer:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self.server is not None
        self.server.close()
        await asyncio.wait_for(self.server.wait_closed(), 5)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode("latin-1").split("\r\n")[1:]
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 5)
        self.headers.append(headers)
        writer.write(
            f"HTTP/1.1 {self.status} Canned\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(self.body)}\r\nConnection: close\r\n\r\n".encode()
            + self.body
        )
        await asyncio.wait_for(writer.drain(), 5)
        writer.close()


async def test_rate_limited_429_is_engine_unavailable(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    body = b'{"error": {"message": "too many requests", "code": 429}}'

    async with CannedServer(429, body) as server:
        with pytest.raises(OcrqError) as caught:
            await make_engine(client, server.url).recognise([render_page(tmp_path, 1, 10, 10)])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert "too many requests" in caught.value.message


async def test_older_vllm_error_shape_gives_its_message(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    body = b'{"object": "error", "message": "bad image", "type": "BadRequestError", "code": 400}'

    async with CannedServer(400, body) as server:
        with pytest.raises(OcrqError) as caught:
            await make_engine(client, server.url).recognise([render_page(tmp_path, 1, 10, 10)])

    assert caught.value.code is ErrorCode.ENGINE_ERROR
    assert "bad image" in caught.value.message


@pytest.mark.parametrize("body", [b"<html>not json</html>", b'{"choices": []}', b'{"id": 1}'])
async def test_unreadable_success_reply_is_engine_error(
    client: httpx.AsyncClient, tmp_path: Path, body: bytes
) -> None:
    async with CannedServer(200, body) as server:
        with pytest.raises(OcrqError) as caught:
            await make_engine(client, server.url).recognise([render_page(tmp_path, 1, 10, 10)])

    assert caught.value.code is ErrorCode.ENGINE_ERROR


@pytest.mark.parametrize(("key", "expected"), [("s3cret", "Bearer s3cret"), ("", None)])
async def test_api_key_is_sent_as_bearer_token_only_when_set(
    client: httpx.AsyncClient, tmp_path: Path, key: str, expected: str | None
) -> None:
    reply = b'{"choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}]}'

    async with CannedServer(200, reply) as server:
        engine = make_engine(client, server.url, vllm_api_key=key)
        output = await engine.recognise([render_page(tmp_path, 1, 10, 10)])

    assert [h.get("authorization") for h in server.headers] == [expected]
    assert output.pages[0].markdown == "hello"
    assert output.usage.prompt_tokens == 0


# --- file handoff: file:// URLs of the rendered pages, and the start-up probe ----------------


@pytest.fixture
def shm(tmp_path: Path) -> Path:
    """A worker's shm_dir; the fake may read files under its ocrq/ folder."""
    (tmp_path / "shm" / "ocrq").mkdir(parents=True)
    return tmp_path / "shm"


@pytest.fixture
def file_fake(fake: FakeVllm, shm: Path) -> Iterator[FakeVllm]:
    """The module's fake, started as with --allowed-local-media-path <shm>/ocrq."""
    fake.configure(allowed_local_media_path=str(shm / "ocrq"))
    yield fake
    fake.configure(allowed_local_media_path="")


def file_engine(client: httpx.AsyncClient, url: str, shm: Path, **settings: Any) -> VllmEngine:
    """An engine in file handoff mode whose worker renders under ``shm``."""
    fast = {"engine_backoff_s": 0.05, "engine_backoff_max_s": 0.1, "redis_url": "redis://x:1/0"}
    return make_engine(client, url, page_handoff="file", shm_dir=str(shm), **{**fast, **settings})


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


async def test_file_handoff_sends_file_urls_that_the_engine_reads(
    file_fake: FakeVllm, client: httpx.AsyncClient, shm: Path
) -> None:
    folder = shm / "ocrq" / "job"
    folder.mkdir()
    pages = [render_page(folder, 1, 640, 480), render_page(folder, 2, 300, 200)]

    output = await file_engine(client, file_fake.url, shm).recognise(pages)

    uris = [Path(p.path).as_uri() for p in pages]
    assert uris[0].startswith("file:///")
    expected = build_request(get_profile("unlimited-ocr"), "baidu/Unlimited-OCR", uris, 0)
    assert file_fake.requests() == [expected]
    [segment] = output.segments  # the fake decoded both files: their sizes are in its answer
    assert "image 1 of 2: 640x480" in segment.markdown
    assert "image 2 of 2: 300x200" in segment.markdown


async def test_file_handoff_of_a_page_never_written_is_internal_and_sends_nothing(
    file_fake: FakeVllm, client: httpx.AsyncClient, shm: Path
) -> None:
    page = PageImage(
        number=1, path=str(shm / "ocrq" / "gone.png"), media_type="image/png", width=1, height=1
    )

    with pytest.raises(OcrqError) as caught:
        await file_engine(client, file_fake.url, shm).recognise([page])

    assert caught.value.code is ErrorCode.INTERNAL
    assert file_fake.requests() == []


async def test_file_handoff_outside_the_allowed_folder_is_engine_error_with_vllm_message(
    file_fake: FakeVllm, client: httpx.AsyncClient, shm: Path, tmp_path: Path
) -> None:
    page = render_page(tmp_path, 1, 100, 100)  # beside shm, not under shm/ocrq

    with pytest.raises(OcrqError) as caught:
        await file_engine(client, file_fake.url, shm).recognise([page])

    assert caught.value.code is ErrorCode.ENGINE_ERROR
    assert "must be a subpath of `--allowed-local-media-path`" in caught.value.message


def test_blank_probe_page_is_a_png_every_decoder_reads() -> None:
    pixmap = pymupdf.Pixmap(blank_png(64))  # type: ignore[no-untyped-call]

    assert (pixmap.width, pixmap.height, pixmap.n) == (64, 64, 3)
    assert set(pixmap.samples) == {255}


async def test_warm_up_probes_one_file_page_and_removes_it(
    file_fake: FakeVllm, client: httpx.AsyncClient, shm: Path
) -> None:
    await file_engine(client, file_fake.url, shm).warm_up()

    [probe] = file_fake.requests()
    url = probe["messages"][0]["content"][1]["image_url"]["url"]
    assert url.startswith((shm / "ocrq").as_uri() + "/")
    assert url.endswith("/probe.png")
    assert probe["max_tokens"] == 1
    assert files_under(shm) == []


async def test_warm_up_in_data_mode_sends_nothing(
    fake: FakeVllm, client: httpx.AsyncClient, shm: Path
) -> None:
    await make_engine(client, fake.url, shm_dir=str(shm)).warm_up()

    assert fake.requests() == []
    assert files_under(shm) == []


@pytest.mark.parametrize(
    ("allowed", "refusal"),
    [
        ("", "Cannot load local files without `--allowed-local-media-path`"),
        ("elsewhere", "must be a subpath of `--allowed-local-media-path`"),
    ],
    ids=["no-allowed-path", "another-allowed-path"],
)
async def test_warm_up_refused_file_handoff_says_why_and_how_to_fix_it(
    fake: FakeVllm,
    client: httpx.AsyncClient,
    shm: Path,
    tmp_path: Path,
    allowed: str,
    refusal: str,
) -> None:
    if allowed:
        (tmp_path / allowed).mkdir()
        fake.configure(allowed_local_media_path=str(tmp_path / allowed))
    try:
        with pytest.raises(PageHandoffError) as caught:
            await file_engine(client, fake.url, shm).warm_up()
    finally:
        fake.configure(allowed_local_media_path="")

    error = caught.value
    assert isinstance(error, ValueError)  # `ocrq worker` prints it in one line, exits 2
    assert error.code is ErrorCode.ENGINE_ERROR
    assert refusal in error.message
    assert f"--allowed-local-media-path {shm / 'ocrq'};" in error.message
    assert "OCRQ_PAGE_HANDOFF=data" in error.message
    assert "\n" not in error.message
    assert len(fake.requests()) == 1  # a refusal is final: no retries
    assert files_under(shm) == []


async def test_warm_up_waits_for_an_engine_still_loading(
    file_fake: FakeVllm, client: httpx.AsyncClient, shm: Path
) -> None:
    file_fake.configure(slow_start_s=1.0)

    await file_engine(client, file_fake.url, shm).warm_up()

    bodies = file_fake.requests()
    assert len(bodies) >= 2  # refused while loading (503), then answered
    assert files_under(shm) == []


async def test_warm_up_gives_up_when_the_engine_stays_away(
    client: httpx.AsyncClient, shm: Path
) -> None:
    engine = file_engine(client, f"http://127.0.0.1:{free_port()}", shm, engine_outage_s=0.3)

    with pytest.raises(PageHandoffError) as caught:
        await engine.warm_up()

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert "unreachable" in caught.value.message
    assert files_under(shm) == []
