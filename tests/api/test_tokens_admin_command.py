"""Tokens made and revoked by ``manage.py jobapitoken`` and in the admin; settings and checks."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import CommandError, call_command
from django.test import Client

from django_leasejobs.models import ApiToken
from django_leasejobs.upkeep import api_tokens as tokens

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


def staff_client(username: str, codenames: list[str]) -> tuple[Client, object]:
    user = make_user(username, codenames, is_staff=True)
    client = Client()
    client.force_login(user)
    return client, user


def test_staff_cannot_mint_a_token_for_a_superuser(db):
    """Only ``add_apitoken``: a POST naming a superuser still makes the caller's own token."""
    root = make_user("root", [], is_staff=True, is_superuser=True)
    client, minter = staff_client("minter", ["add_apitoken", "view_apitoken"])
    form = client.get("/admin/django_leasejobs/apitoken/add/").content.decode()
    assert 'name="user"' not in form
    response = client.post(
        "/admin/django_leasejobs/apitoken/add/",
        {"user": root.pk, "name": "mine", "expires_at_0": "", "expires_at_1": ""},
    )
    assert response.status_code == 200
    secret = re.search(r'id="leasejobs-api-token">(ljt_[^<]+)<', response.content.decode()).group(1)
    token = ApiToken.objects.get(name="mine")
    assert token.user == minter
    assert not ApiToken.objects.filter(user=root).exists()
    status, _ = Caller(root, secret).get("jobs/")
    assert status == 403  # acts as the minter, who may not view jobs
    entry = LogEntry.objects.get(object_id=str(token.pk))
    assert entry.user == minter
    assert "for user minter" in entry.get_change_message()


def test_a_nul_in_a_token_list_filter_is_an_invalid_lookup(db):
    # PostgreSQL's driver cannot send a NUL (a 500 there); Django's answer: ?e=1.
    client, _ = staff_client("me", ["view_apitoken"])
    response = client.get("/admin/django_leasejobs/apitoken/?name=%00")
    assert response.status_code == 302
    assert response["Location"] == "/admin/django_leasejobs/apitoken/?e=1"


def test_staff_see_and_revoke_only_their_own_tokens(db):
    other = make_user("other", [])
    theirs, _ = tokens.issue(other, name="theirs")
    client, me = staff_client("me", ["add_apitoken", "view_apitoken", "change_apitoken"])
    mine, _ = tokens.issue(me, name="mine")
    listing = client.get("/admin/django_leasejobs/apitoken/").content.decode()
    assert "mine" in listing
    assert "theirs" not in listing
    assert client.get(f"/admin/django_leasejobs/apitoken/{theirs.pk}/change/").status_code == 302
    client.post(
        "/admin/django_leasejobs/apitoken/",
        {"action": "revoke_selected", "_selected_action": [theirs.pk, mine.pk]},
    )
    assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None
    assert ApiToken.objects.get(pk=mine.pk).revoked_at is not None


def test_a_superuser_makes_a_token_for_another_user_and_the_log_says_so(db):
    root = make_user("root", [], is_staff=True, is_superuser=True)
    bot = make_user("deploy-bot", ["view_job"])
    client = Client()
    client.force_login(root)
    response = client.post(
        "/admin/django_leasejobs/apitoken/add/",
        {"user": bot.pk, "name": "bot", "expires_at_0": "", "expires_at_1": ""},
    )
    assert response.status_code == 200
    token = ApiToken.objects.get(name="bot")
    assert token.user == bot
    entry = LogEntry.objects.get(object_id=str(token.pk))
    assert entry.user == root
    assert f"for user deploy-bot (id {bot.pk})" in entry.get_change_message()
