"""A task declared through the django-tasks backport (``from django_tasks import task``).

Projects such as Wagtail enqueue this way on Django 5.2 and 6.x alike; the backport reads the
same ``TASKS`` setting and instantiates the LeaseJobsBackend itself.
"""

from __future__ import annotations

from django_tasks import task


@task
def multiply(a: int, b: int) -> int:
    return a * b
