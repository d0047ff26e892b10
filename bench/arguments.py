"""Command-line argument types the benchmarks share."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection


def names_of(known: Collection[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names, each one of ``known``."""

    def parse(text: str) -> list[str]:
        names = text.split(",")
        if unknown := [n for n in names if n not in known]:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {sorted(known)}")
        return names

    return parse
