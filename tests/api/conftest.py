"""API fixtures: callers with exactly the permissions a test needs, by token or by session."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_leasejobs.upkeep import api_tokens as tokens

ALL = [
    "add_job",
    "view_job",
    "cancel_job",
    "delete_job",
    "run_job_now",
    "view_deadletter",
    "replay_deadletter",
    "view_schedule",
    "pause_queue",
    "view_workflowrun",
    "cancel_workflowrun",
]
API = "/jobs/api/"


class Caller:
    """A user of the API through a bearer token: ``get``/``post`` answer (status, json)."""

    def __init__(self, user: User, secret: str | None) -> None:
        self.user, self.secret = user, secret
        self.client = Client()
        self.last: Any = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"} if self.secret else {}

    def get(self, path: str, **params: Any) -> tuple[int, Any]:
        self.last = self.client.get(API + path, params, headers=self.headers())
        return self.last.status_code, self.last.json()

    def post(self, path: str, body: Any = None, raw: str | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else ("" if body is None else json.dumps(body))
        self.last = self.client.post(
            API + path, data, content_type="application/json", headers=self.headers()
        )
        return self.last.status_code, self.last.json()


def make_user(username: str, codenames: list[str], **fields: Any) -> User:
    user = User.objects.create_user(username, **fields)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="django_leasejobs", codename__in=codenames
        )
    )
    return user


@pytest.fixture
def caller(db) -> Callable[..., Caller]:
    """``caller("cancel_job", ...)``: a token caller holding only these permissions."""
    count = iter(range(1000))

    def make(*codenames: str) -> Caller:
        user = make_user(f"api{next(count)}", list(codenames))
        _, secret = tokens.issue(user, name="test")
        return Caller(user, secret)

    return make


@pytest.fixture
def operator(caller) -> Caller:
    """Every permission the API checks."""
    return caller(*ALL)
