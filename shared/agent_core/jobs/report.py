"""What one job run (a scheduled pass, a worker batch) found, enqueued, summarised, skipped and failed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JobReport:
    scanned: int = 0
    enqueued: int = 0
    skipped: int = 0
    summarised: int = 0
    failed: int = 0
    details: dict[str, int] = field(default_factory=dict)
    job_run_id: str = ""

    def count(self, detail: str, n: int = 1) -> None:
        self.details[detail] = self.details.get(detail, 0) + n

    def counts(self) -> dict[str, object]:
        """The log fields of the run's `*_end` line."""
        return {
            "scanned": self.scanned,
            "enqueued": self.enqueued,
            "summarised": self.summarised,
            "skipped": self.skipped,
            "failed": self.failed,
            **self.details,
        }
