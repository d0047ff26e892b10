"""The OpenAPI document declares the three upload formats, every error, and the security."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import TestClient

from ocrq.producer.openapi import ROUTE_ERRORS


def document(client: TestClient[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = client.get("/schema/openapi.json").json()
    return schema


def test_the_submit_route_declares_its_three_body_formats(api: TestClient[Any]) -> None:
    body = document(api)["paths"]["/v1/jobs"]["post"]["requestBody"]
    assert body["required"] is True
    assert {"application/json", "multipart/form-data", "application/pdf", "image/*"} <= set(
        body["content"]
    )
    names = {p["name"] for p in document(api)["paths"]["/v1/jobs"]["post"]["parameters"]}
    assert {"dpi", "lane", "filename", "Idempotency-Key"} <= names


def test_every_error_a_route_can_answer_is_declared_with_the_error_body(
    api: TestClient[Any],
) -> None:
    paths = document(api)["paths"]
    for (method, path), statuses in ROUTE_ERRORS.items():
        responses = paths[path][method]["responses"]
        for status in statuses:
            schema = responses[str(status)]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    assert "Retry-After" in paths["/v1/jobs"]["post"]["responses"]["503"]["headers"]
    error = document(api)["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["code", "message"]


def test_security_is_declared_only_when_keys_are_required(
    api: TestClient[Any], make_client: Any
) -> None:
    assert "securitySchemes" not in document(api)["components"]
    secured = document(make_client(api_keys="acme:k"))
    assert set(secured["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert secured["paths"]["/v1/jobs"]["post"]["security"] == [{"bearer": []}, {"apiKey": []}]


def test_options_the_engine_cannot_run_are_not_offered(make_client: Any) -> None:
    local = document(make_client(engine="local"))["components"]["schemas"]["JobOptions"]
    assert local["properties"]["profile"] == {"type": "null"}
    vllm = document(
        make_client(engine="vllm", vllm_url="http://v", vllm_model="baidu/Unlimited-OCR")
    )
    profile = vllm["components"]["schemas"]["JobOptions"]["properties"]["profile"]
    assert profile["anyOf"][0] == {"enum": ["unlimited-ocr"]}


def test_swagger_ui_is_served_by_the_producer_with_no_outside_url(api: TestClient[Any]) -> None:
    page = api.get("/schema/swagger").text
    urls = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page)
    assert urls and all(u.startswith("/schema/") for u in urls), urls
    for url in urls:
        assert api.get(url).status_code == 200, url
