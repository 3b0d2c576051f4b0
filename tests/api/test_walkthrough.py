"""The curl walk-through of docs/api.md, run as written with real curl against a live server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from django_leasejobs.api import schema
from django_leasejobs.models import Job, Pause
from django_leasejobs.upkeep import api_tokens as tokens

from .conftest import make_user

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def walkthrough() -> str:
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(
        r"<!-- walkthrough:start -->\n```sh\n(.*?)```\n<!-- walkthrough:end -->", text, re.S
    )
    assert block is not None, "docs/api.md lost its walk-through block"
    # The two exports are the reader's to fill in; the test gives its own values.
    return "\n".join(
        line
        for line in block.group(1).splitlines()
        if not line.startswith(("export API=", "export TOKEN="))
    )


def test_the_walkthrough_runs_as_written(live_server, transactional_db, tmp_path):
    assert shutil.which("curl"), "the walk-through needs the curl program (apt-get install curl)"
    user = make_user("walker", ["add_job", "view_job", "cancel_job", "pause_queue"])
    _, secret = tokens.issue(user, name="walkthrough")
    script = walkthrough()
    assert script.count("curl ") >= 11
    env = {**os.environ, "API": f"{live_server.url}/jobs/api", "TOKEN": secret}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    job = Job.objects.get(dedupe_key="walkthrough")
    assert job.status == "cancelled"
    assert Job.objects.count() == 1
    assert json.loads((tmp_path / "openapi.json").read_text()) == schema.document()
    assert '"status": "cancelled"' in done.stdout  # the cancel's answer was printed
    assert done.stdout.count('"kind": "queue", "name": "default"') == 3  # pause, list, resume
    assert not Pause.objects.exists()
