"""Tokens made and revoked by ``manage.py jobapitoken`` and in the admin; settings and checks."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import CommandError, call_command
from django.test import Client

from django_leasejobs.models import ApiToken

from .conftest import Caller, make_user


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("jobapitoken", *args, stdout=out)
    return out.getvalue()


def test_create_prints_the_secret_once_and_it_works(db):
    user = make_user("deploy", ["view_job"])
    output = run("create", "deploy", "--expires", "30", "--name", "deploy script")
    secret = re.search(r"(ljt_\S+)", output).group(1)
    token = ApiToken.objects.get(user=user)
    assert token.name == "deploy script"
    assert token.expires_at is not None
    assert secret not in run("list")
    assert token.prefix in run("list")
    assert Caller(user, secret).get("jobs/")[0] == 200
    assert LogEntry.objects.filter(object_id=str(token.pk), user=user).exists()
    assert f"Revoked API token #{token.pk}" in run("revoke", str(token.pk))
    assert Caller(user, secret).get("jobs/")[0] == 401


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create", "nobody"), "No user 'nobody'"),
        (("revoke", "999"), "No API token #999"),
    ],
)
def test_command_refusals(db, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


@pytest.mark.parametrize(
    "args",
    [("create", "u", "--expires", "0"), ("create", "u", "--expires", "x"), ("revoke", "x"), ()],
)
def test_command_bad_flags(db, args):
    make_user("u", [])
    with pytest.raises(CommandError):
        run(*args)


def test_inactive_user_and_double_revoke_are_refused(db):
    make_user("gone", [], is_active=False)
    with pytest.raises(CommandError, match="inactive"):
        run("create", "gone")
    make_user("here", [])
    token_id = re.search(r"#(\d+)", run("create", "here")).group(1)
    run("revoke", token_id)
    with pytest.raises(CommandError, match="already revoked"):
        run("revoke", token_id)


def test_admin_creates_a_token_and_shows_it_once(db):
    admin = make_user("root", [], is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    response = client.post(
        "/admin/django_leasejobs/apitoken/add/",
        {"user": admin.pk, "name": "ci", "expires_at_0": "", "expires_at_1": ""},
    )
    assert response.status_code == 200
    secret = re.search(r'id="leasejobs-api-token">(ljt_[^<]+)<', response.content.decode()).group(1)
    token = ApiToken.objects.get(name="ci")
    assert Caller(admin, secret).get("jobs/")[0] == 200
    page = client.get(f"/admin/django_leasejobs/apitoken/{token.pk}/change/").content.decode()
    assert secret not in page
    client.post(
        "/admin/django_leasejobs/apitoken/",
        {"action": "revoke_selected", "_selected_action": [token.pk]},
    )
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    assert Caller(admin, secret).get("jobs/")[0] == 401
