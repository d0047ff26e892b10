"""Sniffing by magic bytes, settings from OCRQ_* variables, the error catalogue."""

from __future__ import annotations

import pickle

import pytest
from support.documents import bmp, jpeg, png, text_pdf, tiff, webp

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import stored_options
from ocrq.shared.settings import load_settings, parse_api_keys
from ocrq.shared.sniff import sniff_media_type


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: text_pdf(), "application/pdf"),
        (lambda: png(4, 4), "image/png"),
        (lambda: jpeg(4, 4), "image/jpeg"),
        (lambda: webp(), "image/webp"),
        (lambda: tiff(), "image/tiff"),
        (lambda: bmp(), "image/bmp"),
    ],
)
def test_the_type_is_sniffed_from_magic_bytes(make: object, expected: str) -> None:
    assert sniff_media_type(make()[:2048]) == expected  # type: ignore[operator]


@pytest.mark.parametrize("data", [b"", b"hello", b"GIF89a....", b"PK\x03\x04zip"])
def test_unsupported_bytes_sniff_as_none(data: bytes) -> None:
    assert sniff_media_type(data) is None


def test_settings_come_from_ocrq_variables_with_laptop_defaults() -> None:
    s = load_settings({"OCRQ_MAX_DOCUMENT_BYTES": "1024", "OCRQ_VLLM_URL": "http://gpu:8000"})
    assert s.api.max_document_bytes == 1024 and s.ocr.engine_name == "vllm"
    assert load_settings({}).ocr.engine_name == "local"
    assert load_settings({}).worker.collect_window_ms == 100


def test_a_bad_setting_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="max_document_bytes"):
        load_settings({"OCRQ_MAX_DOCUMENT_BYTES": "ten"})
    with pytest.raises(ValueError, match="tenant:key"):
        load_settings({"OCRQ_API_KEYS": "no-colon"})


def test_api_keys_map_keys_to_tenants() -> None:
    assert parse_api_keys(" acme:k1 , globex:k2,") == {"k1": "acme", "k2": "globex"}


def test_errors_survive_a_process_pool_round_trip() -> None:
    err = pickle.loads(pickle.dumps(OcrqError(ErrorCode.QUEUE_FULL, "full", retry_after=3)))
    assert (err.code, err.message, err.retry_after) == (ErrorCode.QUEUE_FULL, "full", 3)
    assert err.http_status == 503 and not OcrqError(ErrorCode.CORRUPT_DOCUMENT, "x").transient
    assert OcrqError(ErrorCode.ENGINE_UNAVAILABLE, "down").transient


def test_stored_options_ignore_fields_a_newer_producer_added() -> None:
    options = stored_options(b'{"batch_size": 4, "colour_mode": "sepia"}')
    assert options.batch_size == 4
