"""A job's terminal outcome as the worker hands it to FINISH, and what the job used."""

from __future__ import annotations

import msgspec

from ocrq.shared.errors import OcrqError
from ocrq.shared.record import Field, error_json
from ocrq.shared.schemas import Status


class Usage(msgspec.Struct, frozen=True):
    """What a recognised job used: counted once, by the script that ends it."""

    engine: str = ""  # the engine that read its pages ("local", "vllm", …)
    engine_ms: int = 0  # time spent in the engine
    bytes_out: int = 0  # the result's JSON


class Outcome(msgspec.Struct, frozen=True):
    """A terminal outcome for FINISH: status plus the JSON for the result or error field."""

    status: Status
    field: Field
    value: bytes
    pages_done: int = 0
    usage: Usage | None = None  # what the job used, counted in the tenant's usage

    @classmethod
    def done(cls, result_json: bytes, pages_done: int, usage: Usage | None = None) -> Outcome:
        """A successful job."""
        return cls(Status.DONE, Field.RESULT, result_json, pages_done, usage)

    @classmethod
    def stored(cls, prefix: str, pages_done: int, usage: Usage | None = None) -> Outcome:
        """A successful job whose result is in the object store, under ``prefix``."""
        return cls(Status.DONE, Field.RESULT_REF, prefix.encode(), pages_done, usage)

    @classmethod
    def failed(cls, error: OcrqError, pages_done: int = 0) -> Outcome:
        """A failed job with its catalogue code."""
        return cls(Status.FAILED, Field.ERROR, error_json(error.code, error.message), pages_done)
