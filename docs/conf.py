"""Sphinx configuration: MyST Markdown pages, the furo theme, a reference written from the code.

``bash .ci/run`` builds the site with warnings as errors (``sphinx-build -W --keep-going -b
html docs <dir>``); ``pip install -e '.[docs]'`` brings what it needs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import django
from django.conf import settings

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

# The reference imports the app (its settings, models, commands and checks): a minimal
# project is enough, and nothing connects to its database.
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django_leasejobs",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
)
django.setup()

import django_leasejobs  # noqa: E402

project = "django-leasejobs"
author = "django-leasejobs contributors"
copyright = "django-leasejobs contributors"
release = django_leasejobs.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "leasejobs_reference",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/conftest.py"]

# Links to a heading of another page (`worker.md#what-it-prints`) resolve as on GitHub.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}

# Options such as `--max-due-age` stay two hyphens, quotes stay straight.
smartquotes = False

html_theme = "furo"
html_title = "django-leasejobs"
# Code blocks in a language Pygments does not know (cron lines, shell sessions) stay plain.
suppress_warnings = ["misc.highlighting_failure"]
