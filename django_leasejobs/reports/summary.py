"""What one worker run reported, by outcome: ``Worker.run()``'s return value and its table."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import Outcome

TABLE_ROWS = ("succeeded", "retried", "dead", "stale", "released", "snoozed", "cancelled")
"""The table's rows: every outcome (``Outcome``'s values), in the order the summary shows them."""


@dataclass
class Summary:
    """What one worker run reported, by outcome: the ``--burst`` summary table."""

    worker_id: str
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    stale: int = 0
    released: int = 0
    snoozed: int = 0
    """The handler raised ``Snooze``: waiting again, its attempt not charged."""
    cancelled: int = 0
    claimed: int = 0
    timed_out: int = 0
    """Attempts this worker ended at their timeout (counted in retried, dead or cancelled)."""
    stuck: int = 0
    """Handlers still running one heartbeat after their attempt was ended (threads lost)."""
    seconds: float = 0.0

    def count(self, outcome: Outcome) -> None:
        """One reported attempt: each outcome's counter is the field named as its value."""
        setattr(self, outcome.value, getattr(self, outcome.value) + 1)

    @property
    def reported(self) -> int:
        return sum(getattr(self, name) for name in TABLE_ROWS)

    def as_table(self) -> str:
        rows = [(name, getattr(self, name)) for name in TABLE_ROWS] + [("total", self.reported)]
        lines = [f"{'outcome':<10} {'jobs':>8}"]
        lines += [f"{name:<10} {value:>8}" for name, value in rows]
        rate = self.reported / self.seconds if self.seconds > 0 else 0.0
        if self.timed_out or self.stuck:
            lines.append(f"timed out: {self.timed_out}, stuck threads: {self.stuck}")
        lines.append(f"worker {self.worker_id}: {self.seconds:.2f} s, {rate:.1f} jobs/s")
        return "\n".join(lines)
