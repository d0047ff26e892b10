"""The OpenAPI document, made to tell the truth about what the routes accept and answer.

Litestar derives most of the document from the handlers, but the submit route reads its
body itself (three formats), and every error is ocrq's ``{code, message}``, not Litestar's
own. ``document_api`` completes the generated document once, at start-up; Swagger UI is
served from the producer (``swagger-ui-bundle``), so the docs work with no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import swagger_ui_bundle
from litestar import Request, Router
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.static_files import create_static_files_router

from ocrq.producer.batches.members import FORMATS_PATTERN
from ocrq.producer.jobs.files import IMAGE_NAME, TABLE_NAME
from ocrq.producer.jobs.outputs import FORMATS
from ocrq.shared.errors import HTTP_STATUS, ErrorCode
from ocrq.shared.profiles import PROFILES
from ocrq.shared.schemas import ErrorBody, JobOptions, SourceBody, SubmitBody, UploadRequest
from ocrq.shared.settings import Settings
from ocrq.shared.usage import UsageReport

ASSETS = "/schema/assets"
ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}

# Every status each route can answer besides its success, as the code can raise them.
ROUTE_ERRORS: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/v1/jobs"): (400, 401, 403, 404, 408, 409, 413, 415, 429, 503),
    ("post", "/v1/uploads"): (400, 401, 409, 413, 503),
    ("get", "/v1/capabilities"): (401,),
    ("get", "/v1/jobs"): (400, 401, 503),
    ("get", "/v1/jobs/{job_id}"): (400, 401, 404, 503),
    ("get", "/v1/jobs/{job_id}/result"): (400, 401, 404, 406, 409, 503),
    ("get", "/v1/jobs/{job_id}/tables/{name}"): (400, 401, 404, 409, 503),
    ("get", "/v1/jobs/{job_id}/images/{name}"): (400, 401, 404, 503),
    ("get", "/v1/jobs/{job_id}/pages/{number}"): (400, 401, 404, 409, 503),
    ("post", "/v1/jobs/{job_id}/cancel"): (401, 404, 409, 503),
    ("delete", "/v1/jobs/{job_id}"): (401, 404, 503),
    ("get", "/v1/jobs/{job_id}/events"): (400, 401, 404, 503),
    ("post", "/v1/batches"): (400, 401, 408, 413, 415, 429, 503),
    ("get", "/v1/batches/{batch_id}"): (400, 401, 404, 503),
    ("get", "/v1/batches/{batch_id}/results"): (400, 401, 404, 503),
    ("get", "/v1/batches/{batch_id}/events"): (401, 404, 503),
    ("post", "/v1/batches/{batch_id}/cancel"): (401, 404, 503),
    ("delete", "/v1/batches/{batch_id}"): (401, 404, 503),
    ("get", "/v1/usage"): (400, 401, 403, 503),
    ("get", "/v1/audit"): (400, 401, 403, 503),
}
STREAMED = {  # 200 bodies Litestar cannot see: (method, path) -> media types
    ("get", "/v1/jobs/{job_id}/events"): ("text/event-stream",),
    ("get", "/v1/batches/{batch_id}/events"): ("text/event-stream",),
    ("get", "/v1/batches/{batch_id}/results"): ("application/x-ndjson", "application/zip"),
}
AUTHENTICATED = frozenset(ROUTE_ERRORS)


class TruthfulJson(JsonRenderPlugin):
    """/schema/openapi.json: Litestar's document, completed by ``document_api`` once."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings
        self._completed: set[int] = set()

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        """The JSON of the completed document."""
        if id(openapi_schema) not in self._completed:  # Litestar builds the dict once
            document_api(openapi_schema, self.settings)
            self._completed.add(id(openapi_schema))
        return super().render(request, openapi_schema)


def openapi_config(settings: Settings) -> OpenAPIConfig:
    """The OpenAPI config: JSON at /schema/openapi.json, Swagger UI at /schema/swagger."""
    return OpenAPIConfig(
        title="ocrq",
        version="1.0.0",
        path="/schema",
        render_plugins=[
            TruthfulJson(settings),
            SwaggerRenderPlugin(
                js_url=f"{ASSETS}/swagger-ui-bundle.js",
                css_url=f"{ASSETS}/swagger-ui.css",
                standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
                favicon=f"<link rel='icon' type='image/png' href='{ASSETS}/favicon-32x32.png'>",
            ),
        ],
    )


def swagger_assets() -> Router:
    """Swagger UI's files, from the package that ships them."""
    return create_static_files_router(
        path=ASSETS,
        directories=[Path(swagger_ui_bundle.swagger_ui_path)],
        include_in_schema=False,
    )


def document_api(schema: dict[str, Any], settings: Settings) -> None:
    """Complete Litestar's document in place: bodies, error responses, security."""
    components = schema.setdefault("components", {})
    definitions = components.setdefault("schemas", {})
    (_, ours) = msgspec.json.schema_components(
        [SubmitBody, SourceBody, UploadRequest, ErrorBody, UsageReport],
        ref_template="#/components/schemas/{name}",
    )
    definitions.update(ours)
    paths = schema.get("paths", {})
    submit = paths["/v1/jobs"]["post"]
    submit["requestBody"] = submit_body()
    document_uploads(paths, definitions, settings)
    submit["parameters"] = raw_query_parameters() + submit.get("parameters", [])
    limits = option_limits(settings)
    definitions["JobOptions"]["properties"].update(limits)
    for parameter in submit["parameters"]:
        parameter["schema"] = limits.get(parameter["name"], parameter["schema"])
    for parameter in paths["/v1/jobs/{job_id}"]["get"].get("parameters", []):
        if parameter["name"] == "wait":
            parameter["schema"]["maximum"] = settings.api.max_wait_s
    for (method, path), statuses in ROUTE_ERRORS.items():
        operation = paths[path][method]
        responses = operation.setdefault("responses", {})
        for status in statuses:
            responses[str(status)] = error_response(status)
        if settings.api.api_keys:
            operation["security"] = [{"bearer": []}, {"apiKey": []}]
    for (method, path), types in STREAMED.items():
        content = {kind: {"schema": {"type": "string"}} for kind in types}
        paths[path][method]["responses"]["200"] = {"description": "streamed", "content": content}
    paths["/v1/usage"]["get"]["responses"]["200"] = usage_response()
    batches = paths["/v1/batches"]["post"]
    batches["requestBody"] = batch_body()
    batches["parameters"] = [
        p for p in raw_query_parameters() if p["name"] not in ("filename", "lane")
    ] + batches.get("parameters", [])
    for parameter in batches["parameters"]:
        parameter["schema"] = limits.get(parameter["name"], parameter["schema"])
    accepted = paths["/v1/batches"]["post"]["responses"]
    accepted["200"] = {**accepted["202"], "description": "an Idempotency-Key replayed"}
    document_prefer_wait(submit, settings)
    document_outputs(paths)
    if settings.api.api_keys:
        components["securitySchemes"] = {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key (OCRQ_API_KEYS), or an OIDC JWT from the issuer "
                "OCRQ_JWT_ISSUER, checked against OCRQ_JWT_JWKS_URL; its tenant comes from "
                "the OCRQ_JWT_TENANT_CLAIM claim. A refused token is 401 token_expired or "
                "token_invalid.",
            },
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        }


def document_prefer_wait(submit: dict[str, Any], settings: Settings) -> None:
    """POST /v1/jobs: the ``Prefer: wait=N`` header and the 200 that carries the job's view."""
    submit["parameters"].append(
        {
            "name": "Prefer",
            "in": "header",
            "description": f"RFC 7240; `wait=N` (N at most {settings.api.max_wait_s}, "
            "OCRQ_MAX_WAIT_S; more is cut to it): answer 200 with the job's view, result "
            "included, when it ends within N seconds, else the usual 202",
            "schema": {"type": "string", "maxLength": 1000},
        }
    )
    responses = submit["responses"]
    responses["202"]["content"]["application/json"]["schema"] = ref("Accepted")
    applied = {
        "description": "`wait=N` when the job ended within the wait (the body is its view)",
        "schema": {"type": "string"},
    }
    responses["200"] = {
        "description": "the job ended within `Prefer: wait` (JobView), or an Idempotency-Key "
        "replayed (Accepted, or JobView when it ended within the wait)",
        "headers": {"Preference-Applied": applied},
        "content": {"application/json": {"schema": {"anyOf": [ref("JobView"), ref("Accepted")]}}},
    }


def document_uploads(
    paths: dict[str, Any], definitions: dict[str, Any], settings: Settings
) -> None:
    """POST /v1/uploads' optional body (its size capped by OCRQ_MAX_SOURCE_BYTES) and the
    one-of rule of a source."""
    size = definitions["UploadRequest"]["properties"]["size"]
    size["anyOf"][0]["maximum"] = settings.blobs.max_source_bytes
    paths["/v1/uploads"]["post"]["requestBody"] = {
        "required": False,
        "description": "What the client is about to PUT (all optional): a size over "
        f"{settings.blobs.max_source_bytes} bytes (OCRQ_MAX_SOURCE_BYTES) is refused at once, "
        "a content_type comes back in the headers to send. 409 when the deployment has no "
        "object store (OCRQ_BLOB_URL).",
        "content": {"application/json": {"schema": ref("UploadRequest")}},
    }
    definitions["Source"]["description"] = (
        "Exactly one of: upload_id (POST /v1/uploads, then PUT), key (s3://bucket/prefix/... "
        "under one of the tenant's OCRQ_SOURCE_PREFIXES), url (https://, fetched by the "
        "worker; no private addresses)"
    )


def document_outputs(paths: dict[str, Any]) -> None:
    """The result's formats, and the routes of a job's tables, figures and pages."""
    result = paths["/v1/jobs/{job_id}/result"]["get"]
    text = {"schema": {"type": "string"}}
    content: dict[str, Any] = {media: text for media in FORMATS.values()}
    content["application/json"] = {"schema": ref("Result")}
    content["application/pdf"] = {"schema": {"type": "string", "format": "binary"}}
    disposition = {"schema": {"type": "string"}, "description": "pdf: named after the input"}
    result["responses"]["200"] = {
        "description": "the result in the format asked (format= wins over Accept; JSON "
        "by default); docs/results.md",
        "headers": {"Content-Disposition": disposition},
        "content": content,
    }
    for parameter in result["parameters"]:
        if parameter["name"] == "format":
            parameter["schema"] = {"type": "string", "enum": list(FORMATS)}
    files = {
        "/v1/jobs/{job_id}/tables/{name}": ("text/csv", TABLE_NAME.pattern, "the table as CSV"),
        "/v1/jobs/{job_id}/images/{name}": ("image/png", IMAGE_NAME.pattern, "the figure"),
    }
    for path, (media, pattern, description) in files.items():
        operation = paths[path]["get"]
        schema = (
            {"type": "string"} if media == "text/csv" else {"type": "string", "format": "binary"}
        )
        operation["responses"]["200"] = {
            "description": description,
            "content": {media: {"schema": schema}},
        }
        for parameter in operation["parameters"]:
            if parameter["name"] == "name":
                parameter["schema"] = {"type": "string", "pattern": f"^{pattern}$"}
    for parameter in paths["/v1/batches/{batch_id}/results"]["get"]["parameters"]:
        if parameter["name"] == "formats":
            parameter["schema"] = {"type": "string", "pattern": FORMATS_PATTERN}
    page = paths["/v1/jobs/{job_id}/pages/{number}"]["get"]
    page["responses"]["200"] = {
        "description": "the page, as soon as it is read",
        "content": {"application/json": {"schema": ref("Page")}},
    }
    for parameter in page["parameters"]:
        if parameter["name"] == "number":
            parameter["schema"] = {"type": "integer", "minimum": 1}


def ref(name: str) -> dict[str, str]:
    """A reference to a component schema."""
    return {"$ref": f"#/components/schemas/{name}"}


def usage_response() -> dict[str, Any]:
    """GET /v1/usage's 200: the report as JSON, or its days as CSV."""
    csv = {"schema": {"type": "string"}, "example": "day,jobs,failed,cancelled,pages,…"}
    return {
        "description": "one entry per day of the range, oldest first, and their totals",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/UsageReport"}},
            "text/csv": csv,
        },
    }


def error_response(status: int) -> dict[str, Any]:
    """One error status: the codes it carries, the {code, message} body."""
    codes = [c.value for c, s in HTTP_STATUS.items() if s == status]
    if status == 405:
        codes = [ErrorCode.INVALID_REQUEST.value]
    response: dict[str, Any] = {
        "description": " | ".join(codes),
        "content": {"application/json": {"schema": ERROR_REF}},
    }
    if status in (409, 429, 503):  # 409: a job (or its page) not ready yet
        response["headers"] = RETRY_AFTER
    return response


def option_limits(settings: Settings) -> dict[str, Any]:
    """Option schemas that depend on this deployment: its page cap, the profiles it runs."""
    runnable = [
        name
        for name, profile in sorted(PROFILES.items())
        if settings.ocr.engine_name == "vllm"
        and (
            settings.ocr.vllm_model in profile.models
            or not any(settings.ocr.vllm_model in p.models for p in PROFILES.values())
        )
    ]
    profile: dict[str, Any] = {"type": "null"}
    if runnable:
        profile = {"anyOf": [{"enum": runnable}, {"type": "null"}]}
    pages = {
        "anyOf": [
            {"type": "integer", "minimum": 1, "maximum": settings.worker.default_max_pages},
            {"type": "null"},
        ]
    }
    return {"profile": profile, "max_pages": pages}


def raw_query_parameters() -> list[dict[str, Any]]:
    """Options of a raw upload, which come as query parameters (and Idempotency-Key)."""
    options = msgspec.json.schema(JobOptions)["$defs"]["JobOptions"]["properties"]
    query = [{"name": "filename", "in": "query", "schema": {"type": "string", "maxLength": 255}}]
    query += [{"name": name, "in": "query", "schema": spec} for name, spec in options.items()]
    header = {"type": "string", "minLength": 1, "maxLength": 200}
    return [*query, {"name": "Idempotency-Key", "in": "header", "schema": header}]


def batch_body() -> dict[str, Any]:
    """POST /v1/batches: several files (multipart), one ZIP, or JSON with base64 documents."""
    binary = {"type": "string", "format": "binary"}
    item = {
        "type": "object",
        "required": ["document"],
        "properties": {
            "document": {"type": "string", "minLength": 1},
            "filename": {"type": "string", "maxLength": 255},
        },
    }
    return {
        "required": True,
        "description": "The documents: `file` parts (a part may be a ZIP), a ZIP body, or "
        '{"documents": [...]}. Options go in the query string and apply to every job.',
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "array", "items": binary}},
                }
            },
            "application/zip": {"schema": binary},
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["documents"],
                    "properties": {"documents": {"type": "array", "items": item}},
                }
            },
        },
    }


def submit_body() -> dict[str, Any]:
    """POST /v1/jobs's three formats: JSON with base64 (or a source), multipart, or the
    document itself."""
    options = msgspec.json.schema(JobOptions)["$defs"]["JobOptions"]["properties"]
    form = {"file": {"type": "string", "format": "binary"}, "filename": {"type": "string"}}
    form.update({name: {"type": "string"} for name in options})
    raw = {"schema": {"type": "string", "format": "binary"}}
    return {
        "required": True,
        "description": "The document as JSON (base64), as a multipart `file` part, or as the "
        "body itself (options then go in the query). Its type comes from its bytes. A JSON "
        '`{"source": {...}}` body queues a document by reference instead (an upload, a key '
        "of the object store, an https:// URL).",
        "content": {
            "application/json": {"schema": {"anyOf": [ref("SubmitBody"), ref("SourceBody")]}},
            "multipart/form-data": {
                "schema": {"type": "object", "required": ["file"], "properties": form}
            },
            "application/pdf": raw,
            "image/*": raw,
            "application/octet-stream": raw,
        },
    }
