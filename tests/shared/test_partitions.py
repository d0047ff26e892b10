"""Partitions: every key one step touches shares a cluster slot, and partitions spread."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from ocrq.shared.keys import CLUSTER_SLOTS, Keys, partition_tags, tag_of, with_tag
from ocrq.shared.settings import load_settings


def slot(key: str) -> int:
    return int(key_slot(key.encode()))


@pytest.mark.parametrize("partitions", [1, 2, 3, 4, 6, 16, 64])
def test_each_partition_hashes_into_its_own_equal_share_of_the_slots(partitions: int) -> None:
    tags = partition_tags(partitions)
    shares = [slot("{" + tag + "}") * partitions // CLUSTER_SLOTS for tag in tags]
    assert shares == list(range(partitions))
    assert all(tag.startswith("p") for tag in tags)  # the KEDA ACL pattern {p*} covers them


def test_one_partition_keeps_bare_ids() -> None:
    assert partition_tags(1) == ("p0",)
    assert with_tag("abc", "p0") == "abc" and tag_of("abc") == "p0"


def test_a_job_id_carries_its_partition_tag() -> None:
    job_id = with_tag("xYz-_0", "p2-7")
    assert job_id == "p2-7.xYz-_0" and tag_of(job_id) == "p2-7"


@pytest.mark.parametrize("partitions", [1, 3])
def test_every_key_a_job_step_touches_lies_in_one_slot(partitions: int) -> None:
    keys = Keys("ocrq:", partitions)
    for tag in keys.tags:
        job_id, batch_id = with_tag("job", tag), with_tag("batch", tag)
        touched = [
            keys.job(job_id), keys.stream("interactive", tag_of(job_id)),
            keys.stream("batch", tag), keys.idem("t", "k", tag), keys.tenant_jobs("t", tag),
            keys.tenant_active("t", tag),
            keys.batch(batch_id), keys.batch_jobs(batch_id), keys.batch_idem("t", "k", tag),
            *keys.no_batch(tag), keys.webhooks(tag), keys.dead(tag), keys.replicated(tag),
        ]  # fmt: skip
        assert len({slot(k) for k in touched}) == 1, touched


def test_an_idempotency_key_always_picks_the_same_partition() -> None:
    keys = Keys("ocrq:", 8)
    first = keys.pick_tag("tenant", "upload-42")
    assert all(keys.pick_tag("tenant", "upload-42") == first for _ in range(20))
    assert first in keys.tags


def test_uploads_without_a_key_spread_over_every_partition() -> None:
    keys = Keys("ocrq:", 3)
    assert {keys.pick_tag("tenant") for _ in range(300)} == set(keys.tags)


def test_a_partition_count_out_of_range_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="OCRQ_PARTITIONS"):
        load_settings({"OCRQ_PARTITIONS": "0"})


def test_sentinel_mode_without_sentinels_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="OCRQ_REDIS_SENTINELS"):
        load_settings({"OCRQ_REDIS_MODE": "sentinel"})
