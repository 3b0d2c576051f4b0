"""Retry delays: exponential, capped, with jitter so that failed jobs do not retry in lockstep."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .conf import settings
from .value_rules import JITTER_MODES


@dataclass(frozen=True)
class Backoff:
    """``delay(attempt) = min(cap, base * 2 ** (attempt - 1))``, then jittered.

    ``full`` jitter draws from ``[0, delay]``; ``equal`` from ``[delay / 2, delay]`` (the default:
    a retry is never immediate, so a job whose lease expired does not go straight back to the head
    of the queue); ``none`` uses the delay as is.
    """

    base: float = 2.0
    cap: float = 3600.0
    jitter: str = "equal"

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0:
            raise ValueError("Backoff base and cap must not be negative.")
        if self.jitter not in JITTER_MODES:
            raise ValueError(f"Backoff jitter must be one of {', '.join(JITTER_MODES)}.")

    @classmethod
    def from_settings(cls) -> Backoff:
        return cls(settings.BACKOFF_BASE, settings.BACKOFF_CAP, settings.BACKOFF_JITTER)

    def ceiling(self, attempt: int) -> float:
        """The delay before jitter for the retry after ``attempt`` (1-based)."""
        exponent = max(attempt - 1, 0)
        if exponent > 64:  # 2**64 * base is past any cap; avoid float overflow
            return self.cap
        return float(min(self.cap, self.base * (2**exponent)))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = self.ceiling(attempt)
        draw = (rng or random).random()
        if self.jitter == "full":
            return ceiling * draw
        if self.jitter == "equal":
            return ceiling / 2 + (ceiling / 2) * draw
        return ceiling
