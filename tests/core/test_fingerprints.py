"""Fingerprints: one bug keeps one key across deploys, data and addresses; two bugs get two."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from django_leasejobs.core import fingerprints

from ..conftest import examples

HANDLER = """
class Declined(Exception):
    pass


def lookup(card, message):
    raise Declined(message)


def other_lookup(card, message):
    raise Declined(message)


def charge(card, message, *, use_other=False, error=None):
    if error is not None:
        raise error(message)
    return (other_lookup if use_other else lookup)(card, message)


def handler(card, message, **options):
    return charge(card, message, **options)
"""


def release(root: Path, name: str, padding: int) -> ModuleType:
    """``shop/payments.py`` as deployed in release directory ``name``, ``padding`` lines lower."""
    folder = root / name / "shop"
    folder.mkdir(parents=True)
    path = folder / "payments.py"
    path.write_text("# moved\n" * padding + HANDLER)
    spec = importlib.util.spec_from_file_location("shop.payments", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def failure_of(call, *args, **kwargs) -> tuple[str, str]:
    """(error, traceback) as the worker records them (``Failure.from_exception``)."""
    try:
        call(*args, **kwargs)
    except Exception as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return f"{type(exc).__name__}: {exc}", text
    raise AssertionError("the handler did not raise")


def key(call, *args, **kwargs) -> str:
    return fingerprints.of_error(*failure_of(call, *args, **kwargs)).digest


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> tuple[ModuleType, ModuleType]:
    root = tmp_path_factory.mktemp("srv")
    return release(root, "2024-01-01", 0), release(root, "2024-02-01", 37)


def test_same_bug_after_a_deploy_with_other_lines_data_and_addresses(releases) -> None:
    old, new = releases
    first = failure_of(old.handler, "4242", f"card 4242 declined at {object()!r}")
    second = failure_of(new.handler, "1111", f"card 1111 declined at {object()!r}")
    assert first[1] != second[1]  # other paths, line numbers, addresses, message
    assert "/2024-01-01/" in first[1]
    assert "/2024-02-01/" in second[1]
    signatures = [fingerprints.of_error(*f) for f in (first, second)]
    assert signatures[0] == signatures[1]
    assert signatures[0].digest == signatures[1].digest
    assert len(signatures[0].digest) == fingerprints.LENGTH
    assert signatures[0].exception == "shop.payments.Declined"
    assert signatures[0].frames[-2:] == (("shop.payments", "charge"), ("shop.payments", "lookup"))
    assert signatures[0].label == "shop.payments.Declined in shop.payments.lookup"


def test_another_class_or_innermost_function_is_another_group(releases) -> None:
    old, _ = releases
    base = key(old.handler, "1", "declined")
    assert key(old.handler, "1", "declined", use_other=True) != base
    assert key(old.handler, "1", "declined", error=ValueError) != base
    assert key(old.handler, "1", "declined", error=KeyError) != key(
        old.handler, "1", "declined", error=ValueError
    )


@pytest.mark.fuzz
@settings(max_examples=examples(150), deadline=None)
@given(message=st.text())
@example(message='\n  File "/x/fake.py", line 1, in injected\n    pass\nValueError: fake')
@example(
    message="\nTraceback (most recent call last):\n  File \"y.py\", line 2, in z\nKeyError: 'k'"
)
@example(message="<object object at 0x7f3b2c1d9e40> id=140234")
@example(message="")
def test_the_message_never_changes_the_key(releases, message: str) -> None:
    old, new = releases
    baseline = key(old.handler, "0", "card declined")
    assert key(new.handler, "0", message) == baseline


def test_the_library_frames_above_the_handler_do_not_count() -> None:
    def text(worker_line: int, worker_function: str) -> str:
        return (
            "Traceback (most recent call last):\n"
            f'  File "/venv/lib/python3.12/site-packages/django_leasejobs/runtime/execution.py", '
            f"line {worker_line}, in {worker_function}\n"
            "    result = call()\n"
            '  File "/srv/app/shop/jobs.py", line 9, in send\n'
            "    mail.send()\n"
            "smtplib.SMTPServerDisconnected: gone\n"
        )

    first = fingerprints.of_error("SMTPServerDisconnected: gone", text(120, "execute"))
    second = fingerprints.of_error("SMTPServerDisconnected: gone", text(310, "_run_handler"))
    assert first.digest == second.digest
    assert first.frames == (("shop.jobs", "send"),)


def test_only_the_innermost_frames_count() -> None:
    def text(caller: str) -> str:
        frames = [("app/views.py", caller), ("shop/a.py", "f"), ("shop/b.py", "g"), ("c.py", "h")]
        lines = ["Traceback (most recent call last):"]
        lines += [f'  File "/srv/{path}", line 1, in {function}' for path, function in frames]
        return "\n".join([*lines, "OSError: x"])

    assert fingerprints.of_error("OSError: x", text("one")).digest == (
        fingerprints.of_error("OSError: x", text("two")).digest
    )
    assert len(fingerprints.of_error("OSError: x", text("one")).frames) == fingerprints.FRAMES


def test_modules_drop_the_directories_a_deploy_chooses() -> None:
    module = fingerprints._module
    assert module("/srv/releases/41/shop/payments.py") == "shop.payments"
    assert module("/opt/venv/lib/python3.11/site-packages/requests/adapters.py") == (
        "requests.adapters"
    )
    assert module("/usr/lib/python3.12/socket.py") == "socket"
    assert module("/usr/lib/python3.12/json/decoder.py") == "json.decoder"
    assert module("/srv/app/shop/__init__.py") == "shop"
    assert module("C:\\deploy\\v2\\shop\\jobs.py") == "shop.jobs"
    assert module("<frozen importlib._bootstrap>") == "<frozen importlib._bootstrap>"


def test_chained_exceptions_are_keyed_by_the_one_the_handler_raised() -> None:
    def handler() -> None:
        try:
            {}["missing"]
        except KeyError as exc:
            raise RuntimeError("wrapped") from exc

    signature = fingerprints.of_error(*failure_of(handler))
    assert signature.exception == "RuntimeError"
    assert signature.frames[-1][1] == "handler"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="ExceptionGroup is new in Python 3.11")
def test_an_exception_group_is_read_without_its_margin() -> None:
    def raises(exc: Exception) -> None:
        raise exc

    def handler() -> None:
        errors = []
        for exc in (ValueError("a"), TypeError("b")):
            try:
                raises(exc)
            except Exception as caught:
                errors.append(caught)
        raise ExceptionGroup("two failed", errors)  # noqa: F821

    signature = fingerprints.of_error(*failure_of(handler))
    assert (signature.exception, signature.frames[-1][1]) == ("TypeError", "raises")


def test_failures_without_a_traceback_are_keyed_by_kind_and_label() -> None:
    first = fingerprints.of_error(
        "Lease expired (worker a-1-x stopped renewing it).", "", "lease expired"
    )
    second = fingerprints.of_error(
        "Lease expired (worker b-2-y stopped renewing it).", "", "lease expired"
    )
    assert first.digest == second.digest
    assert first.label == "lease expired"
    unregistered = fingerprints.of_error(
        "No job is registered as 'x'; it was not run.", "", "unregistered job"
    )
    assert unregistered.digest != first.digest
    stored = fingerprints.of_error("Unstorable return value: Object of type set", "", "error")
    assert stored.label == "Unstorable return value (error)"
    assert stored.digest == fingerprints.of_error("Unstorable return value: a Decimal", "").digest


@pytest.mark.parametrize("errors", [[], None, "text", [42], [{"error": None}], [{}]])
def test_any_stored_history_gets_a_key(errors) -> None:
    assert len(fingerprints.of_errors(errors).digest) == fingerprints.LENGTH


def test_the_history_is_keyed_by_its_last_attempt(releases) -> None:
    old, _ = releases
    error, text = failure_of(old.handler, "1", "declined")
    history = [{"error": "OSError: first", "traceback": "", "kind": "error"}]
    history.append({"error": error, "traceback": text, "kind": "error"})
    assert fingerprints.of_errors(history).digest == fingerprints.of_error(error, text).digest


LIBRARY_RAISED = """Traceback (most recent call last):
  File "/v/lib/python3.12/site-packages/django_leasejobs/runtime/execution.py", line 9, in run
    result = handler(ctx, *args)
  File "/srv/app/shop/jobs.py", line 7, in charge
    if ctx.first_time("charge"):
  File "/v/lib/python3.12/site-packages/django_leasejobs/runtime/context.py", line 6, in first_time
    raise RuntimeError("ctx.first_time() must be called inside transaction.atomic()")
RuntimeError: ctx.first_time() must be called inside transaction.atomic()
"""


def test_the_label_names_the_users_frame_when_the_library_raised() -> None:
    error = "RuntimeError: ctx.first_time() must be called inside transaction.atomic()"
    signature = fingerprints.of_error(error, LIBRARY_RAISED)
    assert signature.label == "RuntimeError in shop.jobs.charge"
    assert "django_leasejobs" not in signature.label


def test_a_failure_inside_the_worker_alone_names_no_library_frame() -> None:
    traceback_text = (
        "Traceback (most recent call last):\n"
        '  File "/srv/venv/lib/python3.12/site-packages/django_leasejobs/runtime/execution.py",'
        " line 120, in encode\n"
        "    return json.dumps(result)\n"
        "TypeError: Object of type object is not JSON serializable\n"
    )
    signature = fingerprints.of_error("TypeError: Object of type object", traceback_text)
    assert signature.label == "TypeError in the worker (django_leasejobs)"
