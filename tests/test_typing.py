"""``fn.enqueue`` is typed from the handler: mypy, run over a sample project, says so.

The top-level names loaded on first use (``Worker``, ``JobContext``) are their classes to mypy,
not ``Any``: a wrong call of them is reported too.

The package ships ``py.typed``, so a project's mypy reads these types. Options travel through
``.using()``, which is typed too; options in ``enqueue``'s keywords work at run time but are
outside the types.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

JOBS = """
from django_leasejobs import JobContext, job


@job
def confirm(order_id: int) -> None: ...


@job(queue="mail", max_attempts=3)
def notify(user_id: int, text: str = "") -> str:
    return text


@job(takes_context=True)
def ctx_job(ctx: JobContext, order_id: int) -> None: ...


@job
async def fetch(url: str) -> bytes:
    return b""
"""

GOOD = """
import datetime as dt

from django_leasejobs.models import Job
from jobs import confirm, ctx_job, fetch, notify

one: Job = confirm.enqueue(1)
confirm.enqueue(order_id=1)
confirm.using(priority=5).enqueue(1)
confirm.using(queue="mail").using(delay=dt.timedelta(minutes=5), dedupe_key="c-1").enqueue(1)
confirm.using(run_at=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)).enqueue(1)
confirm.enqueue_many([((1,), {}), {"args": [2], "priority": 3}])
notify.enqueue(1, text="hi")
text: str = notify(1)
ctx_job.enqueue(1)
ctx_job.using(priority=5).enqueue(order_id=1)
fetch.enqueue("https://example.com")


async def view() -> None:
    await confirm.aenqueue(1)
    await confirm.using(priority=1).aenqueue(1)
    jobs: list[Job] = await notify.aenqueue_many([((1,), {})])
"""

BAD = """
from django_leasejobs import JobContext, Worker
from jobs import confirm, ctx_job, notify

confirm.enqueue("x")  # BAD: arg-type
confirm.enqueue()  # BAD: call-arg
confirm.enqueue(1, 2)  # BAD: call-arg
confirm.enqueue(1, priority=5)  # BAD: call-arg
confirm.using(prio=5)  # BAD: call-arg
confirm.using(priority="high")  # BAD: arg-type
confirm.using(on_conflict="merge")  # BAD: arg-type
notify.enqueue(1, txt="hi")  # BAD: call-arg
ctx_job.enqueue("x")  # BAD: arg-type
ctx_job.using(priority=5).enqueue(1, 2)  # BAD: call-arg
Worker(["default"], concurrency="4")  # BAD: arg-type
JobContext.no_such_flag  # BAD: attr-defined
"""

CONFIG = """
[mypy]
python_version = 3.11
strict_optional = True
disallow_untyped_defs = True
warn_unused_ignores = True
follow_imports = silent
ignore_missing_imports = True
"""


def mypy(tmp_path: Path, *files: str) -> tuple[int, str]:
    (tmp_path / "mypy.ini").write_text(CONFIG)
    (tmp_path / "jobs.py").write_text(textwrap.dedent(JOBS))
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # this tree's django_leasejobs
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            *files,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return result.returncode, result.stdout + result.stderr


def test_mypy_reports_bad_enqueues_and_passes_good_ones(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    status, output = mypy(tmp_path, "jobs.py", "good.py", "bad.py")
    assert status == 1, output
    reported = {
        (int(line), code)
        for line, code in re.findall(r"^bad\.py:(\d+): error: .*\[([\w-]+)\]$", output, re.M)
    }
    expected = {
        (number, line.split("# BAD: ")[1])
        for number, line in enumerate(textwrap.dedent(BAD).splitlines(), start=1)
        if "# BAD: " in line
    }
    assert reported == expected, output
    assert "good.py" not in output, output
    assert "jobs.py" not in output, output
    wrong_type = (
        'Argument 1 to "enqueue" of "JobFunction" has incompatible type "str"; expected "int"'
    )
    assert f"bad.py:5: error: {wrong_type}" in output


def test_the_package_ships_py_typed() -> None:
    assert (ROOT / "django_leasejobs" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    package_data = pyproject.split("[tool.setuptools.package-data]")[1]
    assert re.match(r'\s*django_leasejobs = \[[^\]]*"py\.typed"', package_data)
