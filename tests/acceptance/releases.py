"""Two releases of one small project on one database, for the rolling-deploy acceptance test.

Each release is a copy of the project ``shop`` written into its own folder (``release1/``,
``release2/``): the same module names, different code, settings pointing at the test database
(migrated once, by the test run). Release 2 adds a job (``ship``), renames one (``notify``
becomes ``alert``, which keeps the old name as an alias) and changes a signature (``charge``
takes ``money`` instead of ``cents``, at version 2, with an upgrader from version 1).

Every handler records the call in a file of its own in ``calls/``: the release that ran it,
the handler, the payload id (each enqueue has its own) and the arguments it received, written
only once the handler is done, so an attempt killed mid-job leaves no record. A ``ship`` whose
payload id has a file in ``gates/`` blocks until that file is removed (the test's "mid-job").

Workers are ``manage.py work WORKER_ID ARGS``: ``runjobworker`` with those arguments, once it
has written the database's time to ``started/WORKER_ID`` (the worker's start, its project
loaded). The producer is a management command: ``manage.py produce TAGS ROUNDS`` enqueues, for each
tag once told to, ROUNDS times one job of each of the release's jobs, payload ids
``TAG-<round>-<job>``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .test_project_modules import the_test_database

APP = "shop.orders.jobs"
"""The module of every job: ``APP + ".charge"`` is a job's name."""

COMMON = {
    "manage.py": """
        import os, sys
        from django.core.management import execute_from_command_line
        os.environ["DJANGO_SETTINGS_MODULE"] = "shop.settings"
        execute_from_command_line(sys.argv)
    """,
    "shop/__init__.py": "",
    "shop/urls.py": "urlpatterns = []\n",
    "shop/orders/__init__.py": "",
    "shop/orders/management/__init__.py": "",
    "shop/orders/management/commands/__init__.py": "",
    "shop/orders/management/commands/produce.py": """
        import time
        from pathlib import Path

        from django.conf import settings
        from django.core.management.base import BaseCommand

        from shop.orders.jobs import produce


        class Command(BaseCommand):
            # For each tag in turn: waits for the file go/<tag> (so the process starts ahead,
            # and lives on as a web process does), then enqueues its rounds.

            def add_arguments(self, parser):
                parser.add_argument("tags")
                parser.add_argument("rounds", type=int)

            def handle(self, *args, tags, rounds, **options):
                for tag in tags.split(","):
                    go = Path(settings.SHOP_FOLDER) / "go" / tag
                    for _ in range(2400):
                        if go.exists():
                            break
                        time.sleep(0.05)
                    else:
                        raise RuntimeError(f"never told to go: {go}")
                    for i in range(rounds):
                        produce(tag, i)
                    self.stdout.write(f"produced {tag}")
    """,
    "shop/orders/management/commands/work.py": """
        import argparse
        from pathlib import Path

        from django.conf import settings
        from django.core.management import call_command
        from django.core.management.base import BaseCommand

        from django_leasejobs.db.dbtime import db_now


        class Command(BaseCommand):
            # runjobworker, once it has written the database's time of its start to
            # started/<worker id>: the moment the project is loaded and the worker starts.

            def add_arguments(self, parser):
                parser.add_argument("worker_id")
                parser.add_argument("argv", nargs=argparse.REMAINDER)

            def handle(self, *args, worker_id, argv, **options):
                started = Path(settings.SHOP_FOLDER) / "started" / worker_id
                started.write_text(db_now().isoformat())
                self.stderr.write(f"work: started at {started.read_text()}")
                call_command("runjobworker", "--worker-id", worker_id, *argv)
    """,
    "shop/orders/records.py": """
        import json
        import os
        import time
        import uuid
        from pathlib import Path

        from django.conf import settings


        def record(job, pid, given):
            # One file per call, renamed into place whole: a reader never sees half of one.
            folder = Path(settings.SHOP_FOLDER) / "calls"
            text = json.dumps(
                {"release": settings.SHOP_RELEASE, "job": job, "pid": pid, "given": given,
                 "process": os.getpid()}
            )
            part = folder / f".{uuid.uuid4().hex}"
            part.write_text(text)
            part.rename(folder / f"{pid}.{uuid.uuid4().hex}.json")


        def gate(pid):
            # Blocks while gates/<pid> exists (bounded: a forgotten gate fails the job).
            closed = Path(settings.SHOP_FOLDER) / "gates" / pid
            if closed.exists():
                closed.with_suffix(".held").touch()
            for _ in range(1200):
                if not closed.exists():
                    return
                time.sleep(0.05)
            raise RuntimeError(f"gate {pid} never opened")
    """,
}

JOBS = {
    1: """
        from django_leasejobs import job

        from .records import record


        @job
        def greet(pid, name):
            record("greet", pid, {"name": name})


        @job
        def notify(pid, text):
            record("notify", pid, {"text": text})


        @job
        def charge(pid, cents):
            record("charge", pid, {"cents": cents})


        def produce(tag, i):
            greet.enqueue(f"{tag}-{i}-greet", f"name {i}")
            notify.enqueue(f"{tag}-{i}-notify", f"text {i}")
            charge.enqueue(f"{tag}-{i}-charge", 100 + i)
    """,
    2: """
        from django_leasejobs import job

        from .records import gate, record


        @job
        def greet(pid, name):
            record("greet", pid, {"name": name})


        @job(aliases=["shop.orders.jobs.notify"])
        def alert(pid, text):
            record("alert", pid, {"text": text})


        def upgrade_v1(args, kwargs):
            pid, cents = args
            return [pid, {"cents": cents, "currency": "EUR"}], kwargs


        @job(version=2, upgrade={1: upgrade_v1})
        def charge(pid, money):
            record("charge", pid, {"money": money})


        @job
        def ship(pid, address):
            gate(pid)
            record("ship", pid, {"address": address})


        def produce(tag, i):
            greet.enqueue(f"{tag}-{i}-greet", f"name {i}")
            alert.enqueue(f"{tag}-{i}-alert", f"text {i}")
            charge.enqueue(f"{tag}-{i}-charge", {"cents": 100 + i, "currency": "SEK"})
            ship.enqueue(f"{tag}-{i}-ship", f"street {i}")
    """,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"timed": {"format": "%(asctime)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "timed"}},
    "loggers": {"django_leasejobs": {"handlers": ["console"], "level": "INFO"}},
}
"""Worker logs (``job.deferred``, ``worker.woke_deferred`` ...) in each process's log file."""

PRODUCED = {1: ("greet", "notify", "charge"), 2: ("greet", "alert", "charge", "ship")}
"""The jobs each release's producer enqueues, in order, each round."""


def expected_calls(pid: str, producer: int) -> dict[tuple[int, str], dict[str, Any]]:
    """Every call that may run the job of payload ``pid`` enqueued by release ``producer``:
    (release of the handler, handler) -> the arguments that handler must receive."""
    _, i_text, kind = pid.rsplit("-", 2)
    i = int(i_text)
    if kind == "greet":  # unchanged: either release runs it with the same arguments
        return {(1, "greet"): {"name": f"name {i}"}, (2, "greet"): {"name": f"name {i}"}}
    if kind == "notify":  # release 1's name: its own handler, or release 2's through the alias
        return {(1, "notify"): {"text": f"text {i}"}, (2, "alert"): {"text": f"text {i}"}}
    if kind == "alert":
        return {(2, "alert"): {"text": f"text {i}"}}
    if kind == "ship":
        return {(2, "ship"): {"address": f"street {i}"}}
    assert kind == "charge", pid
    if producer == 1:  # version 1: as written, or upgraded for release 2's handler
        return {
            (1, "charge"): {"cents": 100 + i},
            (2, "charge"): {"money": {"cents": 100 + i, "currency": "EUR"}},
        }
    return {(2, "charge"): {"money": {"cents": 100 + i, "currency": "SEK"}}}


def payload_ids(tag: str, rounds: int, release: int) -> list[str]:
    return [f"{tag}-{i}-{kind}" for i in range(rounds) for kind in PRODUCED[release]]


@dataclass
class Worker:
    """One ``runjobworker`` process of a release."""

    worker_id: str
    process: subprocess.Popen[bytes]
    log_path: Path
    started_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def started_at(self) -> dt.datetime | None:
        """The database's time when the worker started (its project loaded), once it has."""
        text = self.started_path.read_text() if self.started_path.exists() else ""
        return dt.datetime.fromisoformat(text) if text else None


@dataclass
class Producer:
    """One ``produce`` process of a release."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def produced(self, tag: str) -> bool:
        """Whether it has enqueued every round of ``tag`` (it failed: an assertion error)."""
        log = self.log_path.read_text(errors="replace")
        assert self.process.poll() in (None, 0), log
        return f"produced {tag}" in log


@dataclass
class Release:
    """One copy of the project; its processes run in its folder, so ``shop`` is its own."""

    number: int
    root: Path
    shared: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        return {**env, "LEASEJOBS_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}

    def _start(self, name: str, *argv: str) -> tuple[subprocess.Popen[bytes], Path]:
        log_path = self.shared / f"{name}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "manage.py", *argv],
                cwd=self.root,
                env=self._env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process, log_path

    def worker(self, name: str, *argv: str) -> Worker:
        worker_id = f"r{self.number}-{name}-{uuid.uuid4().hex[:6]}"
        process, log_path = self._start(worker_id, "work", worker_id, "--no-scheduler", *argv)
        return Worker(worker_id, process, log_path, self.shared / "started" / worker_id)

    def producer(self, rounds: int, *tags: str) -> Producer:
        """A web process of this release, in the background, that enqueues ``rounds`` rounds
        for each tag in turn once told (:func:`go`)."""
        process, log_path = self._start(
            f"produce-{self.number}", "produce", ",".join(tags), str(rounds)
        )
        return Producer(process, log_path)

    def kill_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


def write_release(shared: Path, number: int) -> Release:
    """Release ``number`` of the shop in ``shared/release<number>``; records go to ``shared``."""
    root = shared / f"release{number}"
    files = {**COMMON, "shop/orders/jobs.py": JOBS[number]}
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    apps = ["django.contrib.auth", "django.contrib.contenttypes", "django_leasejobs", "shop.orders"]
    (root / "shop" / "settings.py").write_text(
        textwrap.dedent(
            f"""
            SECRET_KEY = "not-secret"
            USE_TZ = True
            ROOT_URLCONF = "shop.urls"
            INSTALLED_APPS = {apps!r}
            DATABASES = {{"default": {the_test_database()!r}}}
            SHOP_RELEASE = {number}
            LOGGING = {LOGGING!r}
            SHOP_FOLDER = {str(shared)!r}
            """
        )
    )
    for folder in ("calls", "gates", "started", "go"):
        (shared / folder).mkdir(exist_ok=True)
    return Release(number, root, shared)


def go(shared: Path, tag: str) -> None:
    """Let the producer of ``tag`` enqueue."""
    (shared / "go" / tag).touch()


def read_calls(shared: Path) -> list[dict[str, Any]]:
    """Every handler call recorded so far."""
    return [json.loads(path.read_text()) for path in sorted((shared / "calls").glob("*.json"))]
