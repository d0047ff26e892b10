"""Settings are grouped by concern, yet every field keeps its one OCRQ_* name."""

from __future__ import annotations

import msgspec
import pytest

from ocrq.shared.settings import (
    GROUPS,
    Settings,
    load_settings,
    replace_settings,
    setting_names,
    settings_of,
)


def test_every_setting_name_is_unique_across_the_groups() -> None:
    grouped = [f.name for cls in GROUPS.values() for f in msgspec.structs.fields(cls)]
    top = [f.name for f in msgspec.structs.fields(Settings) if f.name not in GROUPS]
    assert len(set(grouped + top)) == len(grouped + top)
    assert sorted(setting_names()) == sorted(grouped + top)


def test_an_environment_variable_lands_in_its_group() -> None:
    s = load_settings({"OCRQ_MAX_JOBS": "7", "OCRQ_PARTITIONS": "2", "OCRQ_LOG_LEVEL": "debug"})
    assert (s.worker.max_jobs, s.store.partitions, s.log_level) == (7, 2, "debug")
    assert s.api.max_document_bytes == 10 * 1024 * 1024  # the rest keep their defaults


def test_flat_overrides_change_one_field_and_keep_the_others() -> None:
    before = settings_of(engine="local", local_workers=3)
    after = replace_settings(before, max_backlog=1, local_workers=5)
    assert (after.api.max_backlog, after.ocr.local_workers) == (1, 5)
    assert after.ocr.engine == "local" and before.ocr.local_workers == 3


def test_an_unknown_setting_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no setting 'max_jbos'"):
        load_settings({}, max_jbos=3)
