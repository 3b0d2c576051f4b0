"""``benchmark --baseline REF``: the same sections on the library of another commit, same run.

A change that halves a figure is seen before it lands only if the old code is measured beside
the new on the same machine at the same moment: figures from another day are another machine.
So the library of ``REF`` (its ``django_leasejobs`` folder, from ``git archive``) is unpacked
into a scratch folder, and every subprocess of the baseline's sections puts it first on
``sys.path`` (``BENCHMARK_LIBRARY``, read by ``benchmarks.settings``); the harness, the test
app's jobs and the peers stay this checkout's. Each section runs once per side per run, the
side going first alternating from run to run, in a database of each side's own migrations.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from . import report

REPOSITORY = Path(__file__).resolve().parents[2]
LIBRARY = "django_leasejobs"


class BaselineError(Exception):
    """The baseline cannot be had (an unknown commit, no git, not a checkout)."""


def unpack(ref: str) -> Path:
    """Unpack the library of ``ref`` into a new scratch folder and return that folder."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", "--format=tar", ref, LIBRARY],
            check=True,
            capture_output=True,
            timeout=120,
        ).stdout
    except FileNotFoundError:
        raise BaselineError("--baseline needs git on PATH") from None
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip() or f"git exited {exc.returncode}"
        raise BaselineError(f"--baseline {ref!r}: {message}") from None
    folder = Path(tempfile.mkdtemp(prefix="leasejobs-baseline-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def comparison(current: dict[str, Any], baseline: dict[str, Any], ref: str) -> str:
    """Each figure both sides have, side by side, with this checkout's over the baseline's."""
    lines = [f"| figure | this checkout | {ref} | ratio |", "|---|---:|---:|---:|"]
    for key, value in current.items():
        old = baseline.get(key)
        if not _number(value) or not _number(old):
            continue
        ratio = report.fmt(value / old) + "x" if old else "-"
        lines.append(f"| {key} | {report.fmt(value)} | {report.fmt(old)} | {ratio} |")
    return "\n".join(lines)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
