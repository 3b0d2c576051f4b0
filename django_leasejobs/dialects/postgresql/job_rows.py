"""Loaded ``Job`` instances from a row's values, without ``Model.__init__``'s per-field work.

``Job.from_db`` calls ``Job(*values)``, which sets the model's fields one ``setattr`` at a time
and sends ``pre_init`` and ``post_init``; a bulk enqueue builds thousands of them, and that was
half of its Python time. When nothing listens for either signal on ``Job``, the model keeps
Django's ``__init__`` and ``from_db``, and every field's class attribute is Django's plain
loading descriptor (for which ``setattr`` on a new instance is a write to its ``__dict__``),
handing it the ``__dict__`` whole builds the very instance ``from_db`` would: the same
attributes, a ``_state`` of that database with ``adding`` off. Otherwise it is ``from_db``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from django.db.models import DEFERRED, Model, signals
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute

from ...models import Job

ATTNAMES = tuple(str(f.attname) for f in Job._meta.concrete_fields)
"""The attributes a builder takes: the model's concrete fields."""

_PLAIN_DESCRIPTORS = (DeferredAttribute, ForeignKeyDeferredAttribute)
_PLAIN = (
    Job.__init__ is Model.__init__
    and Job.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]
    and all(type(inspect.getattr_static(Job, a)) in _PLAIN_DESCRIPTORS for a in ATTNAMES)
)


def builder(alias: str) -> Callable[[dict[str, Any]], Job]:
    """A function making the ``Job`` loaded from ``alias`` with these attributes (a new dict
    by field attname, which the job keeps as its ``__dict__``; a field missing from it is
    deferred, loaded on access). Signal receivers are looked up here, once for the rows it
    builds."""
    if not _PLAIN or signals.pre_init.has_listeners(Job) or signals.post_init.has_listeners(Job):
        return lambda attrs: Job.from_db(
            alias, ATTNAMES, [attrs.get(name, DEFERRED) for name in ATTNAMES]
        )

    new = Job.__new__

    def build(attrs: dict[str, Any]) -> Job:
        state = ModelState()
        state.adding = False
        state.db = alias
        job = new(Job)
        job.__dict__ = attrs
        job._state = state
        return job

    return build
