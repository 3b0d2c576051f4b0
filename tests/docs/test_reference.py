"""The reference is written from the code into the pages (``python docs/generate.py``): these
tests keep the code describing itself, so that nothing it defines reaches the reference blank,
and keep the pages' generated text what the generator writes now.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
sys.path[:0] = [str(DOCS), str(DOCS / "_ext")]

import reference_data as data  # noqa: E402

from django_leasejobs.core import conf  # noqa: E402
from django_leasejobs.models import Status  # noqa: E402


def test_every_setting_has_a_meaning() -> None:
    rows = data.settings()
    assert {row.name for row in rows} == {conf.PREFIX + name for name in conf.DEFAULTS}
    blank = [row.name for row in rows if not row.doc]
    assert blank == [], f"settings without a docstring on conf.Settings: {blank}"


def test_every_typed_setting_has_a_default() -> None:
    """A property without a DEFAULTS entry would be missing from the reference's table."""
    from django_leasejobs.checks.settings import setting_names

    assert set(setting_names()) == set(conf.DEFAULTS)


def test_every_job_option_is_described_and_nothing_else() -> None:
    from django_leasejobs import jobs

    rows = data.job_options()
    assert "queue" in {row.name for row in rows}
    blank = [row.name for row in rows if not row.doc]
    assert blank == [], f"@job options missing from job()'s docstring: {blank}"
    stale = set(data._described(jobs.job.__doc__ or "")) - {row.name for row in rows}
    assert stale == set(), f"job()'s docstring describes options it does not take: {stale}"


def test_every_enqueue_option_is_described_by_using() -> None:
    from django_leasejobs import jobs, protocol

    described = data._described(jobs.JobFunction.using.__doc__ or "")
    assert set(described) == set(protocol.ENQUEUE_OPTIONS)
    assert all(described.values()), described


def test_every_check_id_the_code_emits_is_described() -> None:
    emitted = data.check_ids_in_code()
    assert {"leasejobs.E001", "leasejobs.W010", "leasejobs.E099"} <= emitted
    missing = sorted(emitted - set(data.check_descriptions()))
    assert missing == [], f"check ids without a line in a check module's docstring: {missing}"


def test_every_command_option_has_help() -> None:
    commands = {command.name: command for command in data.commands()}
    assert {"runjobworker", "jobstats", "checkjobs", "prunejobs", "syncschedules"} <= set(commands)
    assert {"--queues", "--burst", "--no-scheduler"} <= data.option_flags(commands["runjobworker"])

    def undocumented(command: data.Command, prefix: str) -> list[str]:
        found = [f"{prefix} {a.flags}" for a in command.arguments if not a.help.strip()]
        if not command.help.strip():
            found.append(f"{prefix}: no help")
        for sub in command.subcommands:
            found += undocumented(sub, f"{prefix} {sub.name}")
        return found

    blank = [line for command in commands.values() for line in undocumented(command, command.name)]
    assert blank == [], f"command arguments without help: {blank}"


def test_every_status_is_documented_where_it_is_defined() -> None:
    rows = data.choices(Status)
    assert [row.value for row in rows] == [member.value for member in Status]
    assert all(row.doc for row in rows), [row.value for row in rows if not row.doc]


def test_every_api_operation_has_a_summary() -> None:
    rows = data.api_operations()
    assert any(row.path.endswith("/jobs/") and row.method == "POST" for row in rows)
    assert [f"{r.method} {r.path}" for r in rows if not r.summary] == []


@pytest.mark.parametrize(
    ("page", "kind"),
    [
        ("settings.md", "settings"),
        ("reference/jobs.md", "job-options"),
        ("reference/jobs.md", "api"),
        ("reference/commands.md", "commands"),
        ("reference/checks.md", "checks"),
        ("reference/models.md", "choices"),
        ("reference/models.md", "model-fields"),
        ("reference/http-api.md", "http-api"),
        ("reference/testing.md", "api"),
    ],
)
def test_reference_pages_are_generated_not_copied(page: str, kind: str) -> None:
    assert f"<!-- generated: {kind}" in (DOCS / page).read_text(encoding="utf-8")


def test_the_generated_text_of_the_pages_is_current() -> None:
    """A new setting, command, option, check id or docstring changes what the generator
    writes: the pages must have been regenerated with it. In a process of its own, as the
    command runs, with the app's defaults (not the test project's settings)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, str(DOCS / "generate.py"), "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_generator_writes_a_block_between_its_markers(tmp_path: Path) -> None:
    import generate

    page = DOCS / "reference" / "example.md"
    text = "# Example\n\n<!-- generated: settings -->\nstale\n<!-- end generated -->\n"
    written = generate.generated(page, text)
    assert written.startswith("# Example\n\n<!-- generated: settings -->\n\n| setting |")
    assert "| `LEASEJOBS_MAX_ATTEMPTS` |" in written
    assert "stale" not in written
    assert written.endswith("\n\n<!-- end generated -->\n")
    assert generate.generated(page, written) == written
    with pytest.raises(ValueError, match="unknown generated block 'setings'"):
        generate.generated(page, text.replace("settings", "setings"))
