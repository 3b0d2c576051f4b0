"""URLs to include: ``path("jobs/", include("django_leasejobs.urls"))``.

That gives ``jobs/health/`` (JSON health: the verdict for anyone, the numbers for monitors) and
``jobs/metrics/`` (Prometheus, optional extra, monitors only); see :mod:`django_leasejobs.views`.
"""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "leasejobs"

urlpatterns = [
    path("health/", views.health, name="health"),
    path("metrics/", views.metrics, name="metrics"),
]
