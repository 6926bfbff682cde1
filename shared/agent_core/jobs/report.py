"""What one scheduled pass found and enqueued."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JobReport:
    scanned: int = 0
    enqueued: int = 0
    skipped: int = 0
    details: dict[str, int] = field(default_factory=dict)
