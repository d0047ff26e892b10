"""GET /v1/capabilities: what a client may send here, so that it picks a path by itself."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any


def test_without_a_store_uploads_are_off_and_the_limits_are_the_inline_ones(
    make_client: Any,
) -> None:
    api = make_client(blob_url="")  # even when the suite runs on a store (OCRQ_TEST_BLOB)
    r = api.get("/v1/capabilities")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "version": importlib.metadata.version("ocrq"),
        "blob_store": False,
        "uploads": False,
        "inline_max_bytes": 256 * 1024,
        "max_document_bytes": 10 * 1024 * 1024,
        "max_source_bytes": 500 * 1024 * 1024,
        "max_source_pages": 2000,
        "max_pages": 200,
    }


def test_with_a_store_uploads_are_on_and_the_settings_show(
    make_client: Any, tmp_path: Path
) -> None:
    client = make_client(
        api_keys="acme:key-a",
        blob_url=f"file://{tmp_path / 'blobs'}",
        inline_max_bytes=1000,
        max_source_bytes=5000,
        max_source_pages=30,
        default_max_pages=20,
    )
    assert client.get("/v1/capabilities").status_code == 401
    r = client.get("/v1/capabilities", headers={"X-API-Key": "key-a"})
    caps = r.json()
    assert (caps["blob_store"], caps["uploads"]) == (True, True)
    assert (caps["inline_max_bytes"], caps["max_source_bytes"]) == (1000, 5000)
    assert (caps["max_source_pages"], caps["max_pages"]) == (30, 20)


def test_the_openapi_document_names_the_new_routes_and_bodies(
    make_client: Any, tmp_path: Path
) -> None:
    doc = (
        make_client(blob_url=f"file://{tmp_path}", max_source_bytes=777)
        .get("/schema/openapi.json")
        .json()
    )
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    assert "/v1/uploads/{upload_id}" not in paths  # reached through a ticket only
    upload = paths["/v1/uploads"]["post"]
    assert upload["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/UploadRequest"
    }
    assert schemas["UploadRequest"]["properties"]["size"]["anyOf"][0]["maximum"] == 777
    assert set(upload["responses"]) >= {"201", "400", "401", "409", "413", "503"}
    json_body = paths["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert {"$ref": "#/components/schemas/SourceBody"} in json_body["schema"]["anyOf"]
    assert "Source" in schemas and "UploadTicket" in schemas and "Capabilities" in schemas
    assert "200" in paths["/v1/capabilities"]["get"]["responses"]
