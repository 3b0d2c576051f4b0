"""What the figures were measured on: cores, memory, load, PostgreSQL and its settings."""

from __future__ import annotations

import datetime as dt
import os
import platform
from typing import Any

import django

from .database import Target


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def describe(target: Target) -> dict[str, Any]:
    about: dict[str, Any] = {
        "when_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": round(_memory_gib(), 1),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "database": target.vendor,
    }
    if target.vendor != "postgresql":  # the portable sections: their server is not described
        return about
    with target.connect() as conn:
        server = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("server_version", "shared_buffers", "synchronous_commit", "fsync")
        }
        sessions = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE state = 'active' AND pid <> pg_backend_pid()"
        ).fetchone()[0]  # type: ignore[index]
    return {**about, "postgresql": server, "other_active_sessions": sessions}
