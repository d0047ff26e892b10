"""Uploads kept coming while Redis fails over: what each got back, in order."""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import dataclass, field

import httpx

from .documents import png


@dataclass
class UploadLoad:
    """A thread that submits small PNGs until stopped; every answer is recorded."""

    api: str
    answers: list[tuple[float, int, str]] = field(default_factory=list)  # (time, status, id)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> UploadLoad:
        """Begin submitting."""
        self._thread = threading.Thread(target=self._run, name="upload-load", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop submitting and wait for the last answer."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def accepted(self) -> list[str]:
        """The ids of every upload answered 202."""
        return [job_id for _, status, job_id in self.answers if status == 202]

    def statuses(self) -> set[int]:
        """Every HTTP status the uploads got."""
        return {status for _, status, _ in self.answers}

    def accepted_after(self, moment: float) -> int:
        """How many uploads were accepted after ``moment`` (time.monotonic)."""
        return len(self.accepted_ids_after(moment))

    def accepted_ids_after(self, moment: float) -> list[str]:
        """The ids of the uploads accepted after ``moment`` (time.monotonic)."""
        return [
            job_id for at, status, job_id in list(self.answers) if at > moment and status == 202
        ]

    def summary_after(self, moment: float) -> dict[int, int]:
        """How many uploads got each status after ``moment`` (for a failure's message)."""
        counts: dict[int, int] = {}
        for at, status, _ in list(self.answers):
            if at > moment:
                counts[status] = counts.get(status, 0) + 1
        return counts

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            i = 0
            while not self._stop.is_set():
                i += 1
                body = {"document": base64.b64encode(png(60 + i % 400, 40)).decode()}
                try:
                    r = client.post(f"{self.api}/v1/jobs", json=body)
                    job_id = r.json().get("id", "") if r.status_code == 202 else ""
                    self.answers.append((time.monotonic(), r.status_code, job_id))
                except httpx.HTTPError:
                    self.answers.append((time.monotonic(), 0, ""))  # no answer at all
                time.sleep(0.02)
