"""glibc's heap told to keep what a finished upload freed, for the next upload to reuse.

Left to itself, glibc hands a freed 10 MiB body back to the kernel, and the next body's
memory is faulted in again, page by page, on the event loop: under four clients uploading
10 MiB documents that was the loop's largest single step (BENCHMARKS.md, issue 30). Blocks
up to BIG_BLOCK come from the heap, and up to KEEP of freed heap stays mapped; bigger blocks
still go straight back. Other C libraries (musl, macOS) have no such knobs and are left alone.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
BIG_BLOCK = 32 * 1024 * 1024  # the most glibc allows for M_MMAP_THRESHOLD on 64-bit
KEEP = 256 * 1024 * 1024  # freed heap kept mapped at most: the RSS a quiet producer keeps


def keep_freed_bodies() -> bool:
    """Ask glibc to reuse freed bodies' memory; False where the C library has no mallopt."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, BIG_BLOCK)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP))
