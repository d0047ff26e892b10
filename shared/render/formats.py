"""The formats a job's result is written in as a file, each with its file's suffix."""

from __future__ import annotations

# One table for the CLI's --out files and the batch ZIP's members, so both name files alike.
SUFFIXES: dict[str, str] = {
    "markdown": ".md",
    "json": ".json",
    "html": ".html",
    "text": ".txt",
    "chunks": ".chunks.jsonl",
    "pdf": ".pdf",
    "fields": ".fields.json",
}
