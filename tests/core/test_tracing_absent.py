"""Without ``opentelemetry-api`` nothing of OpenTelemetry is imported, and jobs are enqueued
and run as before (``core/tracing.py``): checked in a new process where the package cannot be
imported, on a database of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys

    sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from testapp import jobs

    from django_leasejobs.core import otel_metrics, tracing
    from django_leasejobs.models import Job
    from django_leasejobs.runtime.worker import Worker

    assert tracing.trace is None
    assert otel_metrics.metrics is None
    single = jobs.add.enqueue(1, 2)
    many = jobs.add.enqueue_many([([3, 4], {}), ([5, 6], {})])
    summary = Worker(lease=5.0, heartbeat=0.1, poll=0.05, scheduler=False).run(burst=True)
    assert summary.succeeded == 3, summary
    ids = [single.pk, *(job.pk for job in many)]
    assert list(Job.objects.filter(pk__in=ids).values_list("result", "trace_context")) == [
        (11, None), (7, None), (3, None)
    ]
    loaded = [name for name, module in sys.modules.items() if module and "opentelemetry" in name]
    assert loaded == [], loaded
    print("ok")
    """
)


def test_jobs_run_without_opentelemetry(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(root / "testproject")]),
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")
