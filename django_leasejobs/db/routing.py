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
from ..models import databases

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


def _queue_alias(model: type[Model], hints: dict[str, Any]) -> str | None:
    """A row's own queue database for its related rows (shards repeat ids: a dead letter's
    job is the one in its database), else the queue database worked on here (the setting's,
    unless a worker or page works on a shard). Never a replica: the library reads those
    itself, where a stale answer is harmless."""
    if not _queue_model(model) or settings.DATABASE is None:
        return None
    instance = hints.get("instance")
    if isinstance(instance, Model) and instance._state.db and _queue_model(type(instance)):
        return databases.primary_of(instance._state.db)
    return databases.job_database()


class JobsRouter:
    """Send the app's models to ``LEASEJOBS_DATABASE``; allow its tables only there and in
    the shards of ``LEASEJOBS_QUEUE_DATABASES``.

    With the setting unset the router has no opinion (``leasejobs.E016`` says so).
    """

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return _queue_alias(model, hints)

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return _queue_alias(model, hints)

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
        return db == settings.DATABASE or db in settings.QUEUE_DATABASES.values()
