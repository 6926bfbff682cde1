"""What an adapter finds in a text: spans with a label, and how a guard masks them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Source = Literal["INPUT", "OUTPUT"]  # Bedrock's words: text going to the model, text coming from it
STARS = "***"


@dataclass(frozen=True)
class Finding:
    """`text[start:end]` matched `label` (EMAIL, PHONE, CARD, AWS_ACCESS_KEY, a custom pattern's name, a Bedrock
    type). `blocked`: the adapter itself says block (a Bedrock policy whose action is BLOCKED), whatever the
    check's action."""

    start: int
    end: int
    label: str
    blocked: bool = False


class GuardrailAdapter(Protocol):
    """Scans one text. `batch_chars`: how many new characters a streamed answer gathers between two scans."""

    name: str
    batch_chars: int

    async def scan(self, text: str, source: Source) -> list[Finding]:
        """Every finding, in order of `start`, none overlapping; raises GuardrailUnavailable when it cannot."""
        ...


def non_overlapping(findings: list[Finding]) -> list[Finding]:
    """Sorted by start, overlapping findings merged into one span (so no part of either is left unmasked),
    labelled by the one that comes first in `findings` (the adapter's priority); blocked if either is."""
    rank = {id(f): i for i, f in enumerate(findings)}
    kept: list[tuple[Finding, int]] = []
    for finding in sorted(findings, key=lambda f: (f.start, -f.end)):
        if kept and finding.start < kept[-1][0].end:
            last, last_rank = kept[-1]
            first = last if last_rank <= rank[id(finding)] else finding
            merged = Finding(last.start, max(last.end, finding.end), first.label, last.blocked or finding.blocked)
            kept[-1] = (merged, min(last_rank, rank[id(finding)]))
            continue
        kept.append((finding, rank[id(finding)]))
    return [f for f, _ in kept]


def masked(text: str, findings: list[Finding], style: str) -> str:
    """`text` with each finding replaced by `{LABEL}` (style `label`) or `***` (style `stars`)."""
    out: list[str] = []
    at = 0
    for finding in findings:
        out.append(text[at : finding.start])
        out.append(replacement(finding.label, style))
        at = finding.end
    out.append(text[at:])
    return "".join(out)


def replacement(label: str, style: str) -> str:
    return STARS if style == "stars" else "{" + label + "}"
