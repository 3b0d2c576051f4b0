"""``JobsRouter``: Django's router that keeps the app's tables in ``LEASEJOBS_DATABASE``.

The library names its database on every statement (``models.databases.job_database``, which
reads the setting first). The router is for Django's own machinery, which asks routers:
``migrate`` (where to make the tables), the admin's querysets, related-object lookups and the
default managers. It speaks for this app's models only and says nothing about any other app,
so it composes with a project's own routers in ``DATABASE_ROUTERS``.

API tokens are the exception: a token points at a user, and a foreign key cannot cross
databases, so their table lives with the user model (:func:`users_database`) and the router
leaves their reads and writes to the other routers.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, router
from django.db.models import Model

from ..core.conf import settings

APP_LABEL = "django_leasejobs"
TOKEN_MODEL = "apitoken"
"""The one model of the app whose table is not in the queue database (see the docstring)."""


def users_database() -> str:
    """Where the user model's table is, and so the API tokens' (their foreign key points at
    it): the database ``migrate`` may make the token table in."""
    return router.db_for_write(get_user_model()) or DEFAULT_DB_ALIAS


def _queue_model(model: type[Model]) -> bool:
    meta = model._meta
    return meta.app_label == APP_LABEL and meta.model_name != TOKEN_MODEL


class JobsRouter:
    """Send the app's models to ``LEASEJOBS_DATABASE``; allow its tables only there.

    With the setting unset the router has no opinion (``leasejobs.E016`` says so).
    """

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return settings.DATABASE if _queue_model(model) else None

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return settings.DATABASE if _queue_model(model) else None

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        """Two of the app's rows may always relate (they share a database); anything else is
        left to the other routers and Django's default (same database only)."""
        if _queue_model(type(obj1)) and _queue_model(type(obj2)):
            return True
        return None

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        """The app's tables (and the data steps of its migrations, which name no model) only
        in the queue database; the token table only with the users."""
        if app_label != APP_LABEL or settings.DATABASE is None:
            return None
        if model_name == TOKEN_MODEL:
            return db == users_database()
        return db == settings.DATABASE
