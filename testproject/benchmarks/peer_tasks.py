"""The peer's workload: a no-op task for django-tasks' database backend worker."""

from __future__ import annotations

try:
    from django.tasks import task  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Django < 6: the backport
    from django_tasks import task  # type: ignore[no-redef,import-not-found,unused-ignore]


@task()
def noop() -> None:
    """Does nothing, like ``testapp.jobs.noop``."""
