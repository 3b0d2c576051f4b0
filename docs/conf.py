"""Sphinx configuration: MyST Markdown pages and the furo theme.

``bash .ci/run`` builds the site with warnings as errors (``sphinx-build -W --keep-going -b
html docs <dir>``); ``pip install -e '.[docs]'`` brings what it needs. The reference's tables
and API entries are Markdown in the pages themselves, written from the code by
``python docs/generate.py`` (a test checks they are current), so the build imports nothing
of the app.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent
VERSION = re.search(
    r'^__version__ = "([^"]+)"',
    (DOCS.parent / "django_leasejobs" / "__init__.py").read_text(encoding="utf-8"),
    re.M,
)

project = "django-leasejobs"
author = "django-leasejobs contributors"
copyright = "django-leasejobs contributors"
release = VERSION[1] if VERSION else "unknown"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/conftest.py"]

# Links to a heading of another page (`worker.md#what-it-prints`) resolve as on GitHub.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# Options such as `--max-due-age` stay two hyphens, quotes stay straight.
smartquotes = False

html_theme = "furo"
html_title = "django-leasejobs"
# Code blocks in a language Pygments does not know (cron lines, shell sessions) stay plain.
suppress_warnings = ["misc.highlighting_failure"]
