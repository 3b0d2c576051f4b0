"""docs/tutorial.md, followed step by step as a reader would: in an empty folder, each ``$``
line of its console blocks runs in a shell and each file block is written where its first line
says (``# shop/jobs.py``), in page order.

The reader's environment stands in for the three set-up lines (a virtualenv and ``pip install``):
the shell finds this run's ``python`` and ``django-admin`` first on ``PATH`` and imports this
tree's ``django_leasejobs``. A block labelled ``...settings.py`` is added at the end of that
file, as the tutorial says; any other file block replaces the file. What each command prints
(stdout and stderr, as a terminal shows them) is compared with the lines below it, ``...``
standing for anything, after the parts that differ on every run (times, durations, the worker's
id, the project's folder) are put in the same form on both sides.

One step waits for the clock in the tutorial: the cron schedule's first minute. The test moves
the schedule's start a minute back in the project's database instead of waiting for it.
At the end, the admin page the tutorial links to shows the dead letter to a superuser.
"""

from __future__ import annotations

import datetime as dt
import doctest
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.docsamples import blocks, runners

TUTORIAL = blocks.ROOT / "docs" / "tutorial.md"

STANDS_IN = {
    "python -m venv .venv",
    ". .venv/bin/activate",
    "python -m pip install django-leasejobs",
}
"""Set-up lines this run's environment stands in for (it already has Django and this tree)."""

VARIES = [
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?\b"), "<date time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "<time>"),
    (re.compile(r"\bin \d+\.\d+ ?s\b"), "in <duration>"),
    (re.compile(r"\bdjango-leasejobs \S+, worker \S+"), "django-leasejobs <version>, worker <id>"),
]
"""What differs on every run, put in one form in the page and in the output alike."""

SHOWN_FOLDER = "/home/me/mysite"
"""The project's folder as the tutorial shows it."""

only_on_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="the tutorial's project uses SQLite: it runs in the SQLite pass",
)


def normalised(text: str, project: Path | None = None) -> str:
    if project is not None:
        text = text.replace(str(project), SHOWN_FOLDER)
    for pattern, replacement in VARIES:
        text = pattern.sub(replacement, text)
    return text


def label(block: blocks.Block) -> str:
    match = runners.PATH_LABEL.match(block.source)
    assert match, f"{block.where}: a file block starts with its path, as `# shop/jobs.py`"
    return match["path"]


class Reader:
    """A shell in the tutorial's folder: the current directory, and the project once made."""

    def __init__(self, folder: Path) -> None:
        self.cwd = folder
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "PYTHONPATH")
        }
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env["PATH"]])
        self.env["PYTHONPATH"] = str(blocks.ROOT)  # this tree's django_leasejobs
        self.env["PYTHONUNBUFFERED"] = "1"  # a terminal's order of prints and log lines
        assert shutil.which("django-admin", path=self.env["PATH"]), "django-admin not found"

    def write(self, block: blocks.Block) -> None:
        target = self.cwd / label(block)
        assert target.parent.is_dir(), f"{block.where}: no folder {target.parent} to write in"
        if target.name.endswith("settings.py"):
            target.write_text(target.read_text() + "\n" + block.source)
        else:
            target.write_text(block.source)

    def run(self, block: blocks.Block, line: str, expected: list[str]) -> None:
        if line in STANDS_IN:
            assert not any(expected), f"{block.where}: `{line}` shows output"
            return
        if line.startswith("cd "):
            self.cwd = self.cwd / line.removeprefix("cd ").strip()
            assert self.cwd.is_dir(), f"{block.where}: no folder {self.cwd}"
            return
        if re.fullmatch(r"python manage\.py runjobworker(?! .*--burst).*", line):
            got = self.run_until_it_exits(line)
        else:
            done = self.shell(line)
            got = done.stdout
            assert done.returncode == 0, f"{block.where}: `{line}` exited {done.returncode}:\n{got}"
        want = "\n".join(expected).rstrip() + "\n" if any(expected) else ""
        got_n, want_n = normalised(got, self.cwd), normalised(want)
        checker = doctest.OutputChecker()
        assert checker.check_output(want_n, got_n, runners.CHECKER_FLAGS), (
            f"{block.where}: `{line}` printed:\n{got}\nThe page shows:\n{want}"
        )

    def shell(self, line: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )

    def run_until_it_exits(self, line: str) -> str:
        """A worker that waits for the next minute: the schedules it syncs at start are moved
        a minute back, so the first occurrence is due now."""
        worker = subprocess.Popen(
            ["bash", "-c", line],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            self.move_schedules_a_minute_back(worker)
            out, _ = worker.communicate(timeout=60)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
        assert worker.returncode == 0, f"`{line}` exited {worker.returncode}:\n{out}"
        return out

    def move_schedules_a_minute_back(self, worker: subprocess.Popen[str], wait: float = 30) -> None:
        database = self.cwd / "db.sqlite3"
        deadline = time.monotonic() + wait
        with sqlite3.connect(database, timeout=10) as db:
            while True:
                rows = db.execute(
                    "SELECT id, created_at FROM django_leasejobs_schedule"
                    " WHERE last_occurrence_at IS NULL"
                ).fetchall()
                if rows:
                    break
                assert worker.poll() is None, "the worker exited before it synced its schedules"
                assert time.monotonic() < deadline, "the worker synced no schedule"
                time.sleep(0.1)  # waiting for the worker's start, not for the clock
            for pk, created_at in rows:
                earlier = dt.datetime.fromisoformat(created_at) - dt.timedelta(minutes=1)
                db.execute(
                    "UPDATE django_leasejobs_schedule SET created_at = ? WHERE id = ?",
                    (earlier.isoformat(sep=" "), pk),
                )


@only_on_sqlite
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    reader = Reader(tmp_path)
    followed = 0
    for block in blocks.blocks(TUTORIAL):
        if block.marker == "not run" or block.is_directive:
            continue
        if block.language == "python":
            reader.write(block)
        elif block.language == "console":
            for line, expected in runners.commands(block.source):
                reader.run(block, line, expected)
        else:
            raise AssertionError(f"{block.where}: a {block.language!r} block it cannot follow")
        followed += 1
    assert followed >= 10, f"only {followed} blocks followed: did the page's blocks change?"
    # The admin page the tutorial links, for the same dead letter, as a superuser sees it.
    [(host, page)] = re.findall(r"<http://([\d.:]+)(/admin/[^>]*)>", TUTORIAL.read_text())
    script = SEE_THE_ADMIN.format(host=host, page=page)
    admin = reader.shell(f"python manage.py shell -v 0 -c {shlex.quote(script)}")
    assert admin.returncode == 0, admin.stdout
    assert admin.stdout.split() == ["200", "True"], admin.stdout


SEE_THE_ADMIN = """
from django.contrib.auth.models import User
from django.test import Client
client = Client(HTTP_HOST="{host}")  # what runserver's address sends
client.force_login(User.objects.create_superuser("admin"))
response = client.get("{page}")
print(response.status_code, "prices.csv does not exist" in response.content.decode())
"""


def test_outputs_are_compared_in_one_form() -> None:
    shown = "11:30:57 succeeded #1 shop.jobs.send_welcome in 0.000 s"
    real = "09:02:13 succeeded #1 shop.jobs.send_welcome in 0.012 s"
    assert normalised(shown) == normalised(real)
    assert normalised(shown) != normalised(real.replace("#1", "#2"))
    assert normalised("db (/tmp/x/mysite/db)", Path("/tmp/x/mysite")) == f"db ({SHOWN_FOLDER}/db)"
