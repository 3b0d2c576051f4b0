"""Run worker processes side by side and watch them: wall time and resident memory (RSS)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO


def rss_mib(pid: int) -> float:
    """Resident set size of a live process, in MiB (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


@dataclass
class Group:
    """Worker processes started together; ``stop()`` ends only these, by their own pids."""

    procs: list[subprocess.Popen[bytes]]
    logs: list[IO[bytes]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    peak_rss: dict[int, float] = field(default_factory=dict)

    @classmethod
    def start(cls, argvs: Sequence[Sequence[str]], env: dict[str, str]) -> Group:
        # stderr goes to a file, not a pipe: a chatty worker must never block on a full pipe.
        logs: list[IO[bytes]] = [tempfile.TemporaryFile() for _ in argvs]  # noqa: SIM115
        procs = [
            subprocess.Popen(list(argv), env=env, stdout=subprocess.DEVNULL, stderr=log)
            for argv, log in zip(argvs, logs, strict=True)
        ]
        return cls(procs, logs)

    def sample(self) -> dict[int, float]:
        now = {p.pid: rss_mib(p.pid) for p in self.procs if p.poll() is None}
        for pid, value in now.items():
            self.peak_rss[pid] = max(self.peak_rss.get(pid, 0.0), value)
        return now

    def wait(self, timeout: float) -> float:
        """Wait for every process to exit (sampling RSS); return the wall time since start."""
        deadline = time.perf_counter() + timeout
        while any(p.poll() is None for p in self.procs):
            if time.perf_counter() > deadline:
                self.stop()
                raise TimeoutError(f"workers still running after {timeout:.0f} s")
            self.sample()
            time.sleep(0.05)
        self.check()
        return time.perf_counter() - self.started

    def check(self) -> None:
        for p, log in zip(self.procs, self.logs, strict=True):
            if p.returncode not in (0, -signal.SIGTERM):
                log.seek(0)
                err = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"worker {p.args!r} exited {p.returncode}: {err}")

    def stop(self, grace: float = 30.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        deadline = time.perf_counter() + grace
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
