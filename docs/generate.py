"""Writes the reference's generated text into the docs' pages, from the code.

    python docs/generate.py           rewrite every generated block that is out of date
    python docs/generate.py --check   change nothing; list the pages out of date, exit 1 if any

A generated block sits between two markers, the first naming what goes there::

    <!-- generated: settings -->
    ...written by this script, never by hand...
    <!-- end generated -->

(kinds and arguments: ``docs/_ext/reference_markdown.py``). The text is in the page itself, so
it reads the same on a code host, in an editor and in the built site; a test runs ``--check``,
so a setting, command, option or docstring changed without regenerating fails CI.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<spec>[^>]*?) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- end generated -->)",
    re.S,
)
PAGES = ("*.md", "howto/*.md", "reference/*.md")


def setup_django() -> None:
    """A minimal project: the app's settings, models, commands and checks, no database use.

    The defaults shown are the app's own, whatever a project would set."""
    import django
    from django.conf import settings

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


def generated(path: Path, text: str) -> str:
    """The page with each generated block written afresh."""
    import reference_markdown

    depth = len(path.relative_to(DOCS).parts) - 1

    def write(match: re.Match[str]) -> str:
        kind, *arguments = shlex.split(match["spec"])
        lines = reference_markdown.render(kind, arguments, depth)
        return f"{match['open']}\n" + "\n".join(lines).strip("\n") + f"\n\n{match['close']}"

    return BLOCK.sub(write, text)


def pages() -> list[Path]:
    return sorted(path for pattern in PAGES for path in DOCS.glob(pattern))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing, exit 1 if stale")
    options = parser.parse_args(argv)
    setup_django()
    stale = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        new = generated(path, text)
        if new != text:
            stale.append(path.relative_to(DOCS.parent).as_posix())
            if not options.check:
                path.write_text(new, encoding="utf-8")
    if options.check and stale:
        print("out of date (run: python docs/generate.py):", *stale, sep="\n  ")
        return 1
    print("written:" if stale else "up to date.", *stale, sep="\n  " if stale else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
