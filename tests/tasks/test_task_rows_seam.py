"""The seam through which the worker and the protocol reach django.tasks rows.

``runtime`` and ``protocol`` never import the tasks face (the layer contract fails the build
if they do); they call the handler the face registers when the app loads. These tests pin
that the loaded app has registered it, and what the handler does before it is registered.
"""

from __future__ import annotations

import asyncio

import pytest

from django_leasejobs.core import task_rows
from django_leasejobs.tasks import results, rows


def test_the_loaded_app_registered_the_tasks_face_handler() -> None:
    handler = task_rows.handler()
    assert isinstance(handler, rows.Handler)
    assert handler.resolve is results.resolve


def test_before_the_app_loads_no_row_is_a_tasks_and_none_runs(monkeypatch) -> None:
    monkeypatch.setattr(task_rows, "_handler", task_rows._NotLoaded())
    handler = task_rows.handler()
    assert handler.is_async(object()) is False
    assert handler.backend_configured() is False
    assert handler.backoff(object()) is None
    with pytest.raises(RuntimeError, match="INSTALLED_APPS"):
        handler.execute(object())
    with pytest.raises(RuntimeError, match="INSTALLED_APPS"):
        asyncio.run(handler.aexecute(object()))
    with pytest.raises(RuntimeError, match="INSTALLED_APPS"):
        handler.resolve("tests.tasks.anything")


def test_registering_replaces_the_handler(monkeypatch) -> None:
    monkeypatch.setattr(task_rows, "_handler", task_rows._NotLoaded())
    rows.register()
    assert isinstance(task_rows.handler(), rows.Handler)
