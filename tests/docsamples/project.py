"""The reader's project, as the samples of one page see it: hidden setup, restored afterwards.

A page's samples build on each other (a job defined in one block is enqueued in the next and
run by a command after that), so a page shares one namespace and one database, in autocommit
as in a real project (a worker's threads see what a sample wrote). Afterwards the database is
flushed, as after a transactional test, and everything the page changed in this process is put
back: settings it declared, logging it configured, jobs it registered.

The reader's project has not configured logging for the app (the test project has): while a
page runs, the ``django_leasejobs`` logger reaches no handler, so the worker writes its lines
for people, as it does for a new project, until a page's own ``LOGGING`` sample says otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import logging.config
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from django.core.management import call_command
from django.test import override_settings

APP_LOGGER = "django_leasejobs"


class LoggingState:
    """Every logger's handlers, level, propagation and disabled flag, to put back later."""

    def __init__(self) -> None:
        self.loggers: dict[str, tuple[list[logging.Handler], int, bool, bool]] = {}
        for logger in self._all():
            self.loggers[logger.name] = (
                list(logger.handlers),
                logger.level,
                logger.propagate,
                logger.disabled,
            )

    @staticmethod
    def _all() -> list[logging.Logger]:
        named = [
            value
            for value in logging.Logger.manager.loggerDict.values()
            if isinstance(value, logging.Logger)
        ]
        return [logging.getLogger(), *named]

    def handlers_added(self) -> list[logging.Handler]:
        """Handlers some logger has now that no logger had when this state was taken."""
        before = {id(h) for handlers, *_ in self.loggers.values() for h in handlers}
        return [h for lg in self._all() for h in lg.handlers if id(h) not in before]

    def restore(self) -> None:
        for logger in self._all():
            handlers, level, propagate, disabled = self.loggers.get(
                logger.name, ([], logging.NOTSET, True, False)
            )
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
            logger.disabled = disabled


class DocProject:
    """One page's project: its settings, logging, registered jobs and scratch folder."""

    def __init__(self) -> None:
        self._overrides: list[override_settings] = []
        self._logging = LoggingState()
        self._page_handlers: list[logging.Handler] = []
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self.cache: dict[str, Any] = {}
        self._modules: list[str] = []
        from django_leasejobs.core import registry

        self._registry = (
            dict(registry._registry),
            set(registry._late),
            set(registry._duplicates),
        )

    def begin(self) -> None:
        logger = logging.getLogger(APP_LOGGER)
        logger.handlers[:] = []
        logger.propagate = False

    def end(self) -> None:
        from django_leasejobs.core import registry

        for override in reversed(self._overrides):
            override.disable()
        self._logging.restore()
        registry._registry.clear()
        registry._registry.update(self._registry[0])
        registry._late.clear()
        registry._late.update(self._registry[1])
        registry._duplicates.clear()
        registry._duplicates.update(self._registry[2])
        if self._scratch is not None:
            self._scratch.cleanup()
        for name in self._modules:
            sys.modules.pop(name, None)
        call_command("flush", interactive=False, verbosity=0)

    def module(self, name: str) -> types.ModuleType:
        """The module a sample labelled ``# shop/jobs.py`` defines, importable by the next
        samples (``from shop.jobs import charge``) until the page ends."""
        parts = name.split(".")
        if parts[0] not in sys.modules:
            # The reader's module lives in an installed app, where a worker may import it:
            # the page's package is allowed as an app's would be.
            from django.conf import settings

            allowed = [*getattr(settings, "LEASEJOBS_TASK_MODULES", ()), parts[0]]
            self.override({"LEASEJOBS_TASK_MODULES": allowed})
        for depth in range(1, len(parts) + 1):
            dotted = ".".join(parts[:depth])
            if dotted not in sys.modules:
                module = types.ModuleType(dotted)
                if depth < len(parts):
                    module.__path__ = []  # a package
                sys.modules[dotted] = module
                self._modules.append(dotted)
                if depth > 1:
                    setattr(sys.modules[".".join(parts[: depth - 1])], parts[depth - 1], module)
        return sys.modules[name]

    @property
    def scratch(self) -> Path:
        """A folder of the page's own (files its samples write), removed afterwards."""
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="leasejobs-docs-")
        return Path(self._scratch.name)

    def override(self, values: dict[str, Any]) -> None:
        """Settings a sample declared, for the rest of the page."""
        override = override_settings(**values)
        override.enable()
        self._overrides.append(override)
        if "LOGGING" in values:
            from django.conf import settings
            from django.utils.log import configure_logging

            before = LoggingState()
            # What django.setup() does with a project's LOGGING.
            configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
            self._page_handlers += before.handlers_added()

    @contextlib.contextmanager
    def terminal(self, stream: TextIO) -> Iterator[None]:
        """What a terminal shows while a command runs: its stdout, its stderr and the stream
        handlers the page's own LOGGING configured, all in ``stream``.

        The app's logger has only the handlers the page configured meanwhile (pytest adds
        its capture handlers to loggers for each test: the reader's project has none).
        """
        logger = logging.getLogger(APP_LOGGER)
        kept = list(logger.handlers)
        logger.handlers[:] = [h for h in kept if h in self._page_handlers]
        previous = []
        for handler in self._page_handlers:
            if isinstance(handler, logging.StreamHandler):
                previous.append((handler, handler.stream))
                handler.setStream(stream)
        try:
            with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
                yield
        finally:
            for handler, old in previous:
                handler.setStream(old)
            logger.handlers[:] = kept
