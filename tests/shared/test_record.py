"""The job record is declared once: the scripts touch only what shared/record.py declares."""

from __future__ import annotations

import msgspec
import pytest
from support.lua_calls import read_script

from ocrq.shared.enqueue import NewJob
from ocrq.shared.errors import ErrorCode
from ocrq.shared.keys import SCRIPT_NAMES, Keys, load_script
from ocrq.shared.lanes import ENTRY_TICKET
from ocrq.shared.record import (
    DEAD_ENTRY_FIELDS,
    ENTRY_BATCH,
    ENTRY_JOB_ID,
    HOOK_FIELDS,
    POLL_FIELDS,
    Field,
    JobEvent,
    JobRecord,
    decode_record,
    error_json,
    new_job_fields,
)
from ocrq.shared.schemas import ErrorBody, JobOptions, Status

FIELDS = {f.value for f in Field}
STATUSES = {s.value for s in Status}


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_scripts_touch_only_declared_fields_and_statuses(name: str) -> None:
    touched = read_script(load_script(name))
    assert touched.fields <= FIELDS, touched.fields - FIELDS
    assert touched.statuses <= STATUSES, touched.statuses - STATUSES


def test_stream_entries_carry_the_declared_fields() -> None:
    keys = Keys("ocrq:")
    alone = NewJob(keys, "j1", "interactive", {Field.TENANT: "t"}, batch="")
    in_batch = NewJob(keys, "j2", "batch", {Field.TENANT: "t"}, batch="b1")
    assert alone.entry(False) == {ENTRY_JOB_ID: "j1"}
    assert in_batch.entry(False) == {ENTRY_JOB_ID: "j2", ENTRY_BATCH: "b1"}
    assert alone.entry(True) == {ENTRY_JOB_ID: "j1", ENTRY_TICKET: "1"}
    poison = read_script(load_script("poison")).entry_fields
    assert poison == {"dead": set(DEAD_ENTRY_FIELDS), "hooks": set(HOOK_FIELDS)}


def test_every_published_event_carries_the_job_event_fields_and_no_other() -> None:
    declared = set(JobEvent.__struct_fields__)
    required = set(JobEvent.__struct_fields__[: -len(JobEvent.__struct_defaults__)])
    published = [read_script(load_script(n)).event_keys for n in SCRIPT_NAMES]
    assert all(required <= keys <= declared for keys in published if keys)
    assert set().union(*published) == declared  # every field is sent by some script


def test_the_reader_catches_an_undeclared_field_and_status() -> None:
    bad = read_script(
        "local job = KEYS[1]\n"
        "redis.call('HSET', job, 'stauts', 'finished', 'worker', ARGV[1])\n"
        "local status = redis.call('HGET', job, 'colour')\n"
        "if status == 'queud' then return 1 end\n"
    )
    assert bad.fields - FIELDS == {"stauts", "colour"}
    assert bad.statuses - STATUSES == {"queud"}


def test_every_field_has_a_place_in_the_record() -> None:
    assert set(JobRecord.__struct_fields__) == FIELDS


def test_a_poll_never_reads_the_payload() -> None:
    assert Field.PAYLOAD not in POLL_FIELDS
    assert Field.STATUS in POLL_FIELDS and Field.RESULT in POLL_FIELDS


def test_a_new_job_round_trips_through_the_codecs() -> None:
    options = JobOptions(dpi=200, lane="batch")
    fields = new_job_fields(
        job_id="j1", tenant="t", filename=None, media_type="image/png", data=b"\x89PNG",
        options=options, created_ms=1_700_000_000_000,
    )  # fmt: skip
    assert set(fields) <= FIELDS
    as_redis = {
        Field(k): str(v).encode() if isinstance(v, int | str) else v for k, v in fields.items()
    }
    record = decode_record(as_redis)
    assert record.status is Status.QUEUED and record.options == options
    assert (record.filename, record.size, record.lane) == ("", 4, "batch")
    assert (record.payload, record.created_at, record.started_at) == (
        b"\x89PNG",
        1_700_000_000_000,
        None,
    )


def test_error_json_is_the_api_error_body() -> None:
    body = msgspec.json.decode(error_json(ErrorCode.POISONED, "delivered 4 times"), type=ErrorBody)
    assert body == ErrorBody(code="poisoned", message="delivered 4 times")
