"""The ``Prefer`` request header (RFC 7240): the one preference ocrq applies is ``wait``."""

from __future__ import annotations

from collections.abc import Iterable


def preferred_wait(headers: Iterable[str], cap_s: int) -> int:
    """Seconds a ``Prefer: wait=N`` asks for, cut to ``cap_s``; 0 when none is asked.

    Preferences are comma-separated, each ``token[=value]`` with ``;`` parameters; names
    compare without case. Other preferences (``respond-async``, ``return=…``) and a wait
    that is not a number are ignored, as the RFC says a server may.
    """
    for header in headers:
        for preference in header.split(","):
            name, _, value = preference.split(";", 1)[0].partition("=")
            value = value.strip().strip('"')
            if name.strip().lower() == "wait" and value.isascii() and value.isdigit():
                return min(int(value), cap_s)
    return 0
