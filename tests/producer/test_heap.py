"""The producer's heap keeps what a finished upload freed, for the next one to reuse."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Bursts of four 10 MiB bodies, each joined from 64 KiB reads as read_bounded does, freed
# together as four uploads finish: the page faults of a burst once the heap is warm (the
# third on), in a fresh process. Left alone, glibc gives the 40 MiB back after each burst.
UPLOADS = """
import resource, sys
from ocrq.producer.heap import keep_freed_bodies
kept = keep_freed_bodies() if sys.argv[1] == "kept" else None
reads = [bytes([n]) * 65536 for n in range(160)]
faults = []
for _ in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    bodies = [b"".join(reads) for _ in range(4)]
    del bodies
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(kept, max(faults[2:]))
"""


def warm_burst_faults(mode: str) -> tuple[str, float]:
    """What keep_freed_bodies answered (None: not called) and a warm burst's page faults."""
    out = subprocess.run([sys.executable, "-c", UPLOADS, mode], capture_output=True, check=True)
    kept, faults = out.stdout.split()
    return kept.decode(), float(faults)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_bodies_are_reused_instead_of_faulted_in_again() -> None:
    kept, faults_kept = warm_burst_faults("kept")
    _, faults_default = warm_burst_faults("default")
    assert kept == "True"
    assert faults_kept < faults_default / 10
