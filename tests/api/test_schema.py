"""The OpenAPI document: served at the root, the copy in docs/api.md current, every route in it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.urls import URLPattern

from django_leasejobs.api import schema, urls
from django_leasejobs.api.errors import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_checked_in_copy_is_current():
    text = DOCS.read_text(encoding="utf-8")
    assert schema.updated(text) == text, (
        "docs/api.md has a stale OpenAPI document: run "
        "`python -m django_leasejobs.api.schema docs/api.md`"
    )


def test_served_at_the_root_without_credentials(client, db):
    response = client.get("/jobs/api/")
    assert response.status_code == 200
    assert response.json() == json.loads(schema.rendered())
    assert response.json()["openapi"] == "3.1.0"


def test_the_enqueue_max_attempts_maximum_is_the_api_setting(client, db, settings):
    """Read when the document is built: the served document follows the setting."""

    def maximum() -> int:
        document = client.get("/jobs/api/").json()
        enqueue = document["components"]["schemas"]["EnqueueRequest"]
        return enqueue["properties"]["max_attempts"]["maximum"]

    assert maximum() == 100
    settings.LEASEJOBS_API_MAX_ATTEMPTS = 7
    assert maximum() == 7


def test_every_route_is_documented_and_every_path_routed():
    routed = set()
    for pattern in urls.urlpatterns:
        if isinstance(pattern, URLPattern) and pattern.name:
            route = "/" + str(pattern.pattern)
            routed.add(re.sub(r"<int:(\w+)>", r"{\1}", route))
    assert routed == set(schema.PATHS)


def test_every_error_code_is_documented_in_the_docs():
    text = DOCS.read_text(encoding="utf-8")
    rows = re.finditer(r"^\| `([a-z_]+)` \| (\d{3}) \|", text, re.M)
    table = {m.group(1): int(m.group(2)) for m in rows}
    assert table == {code: status for code, (status, _) in CODES.items()}


def test_updated_refuses_a_page_without_the_block():
    import pytest

    with pytest.raises(ValueError, match="openapi:start"):
        schema.updated("# nothing here\n")
