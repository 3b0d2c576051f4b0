"""The screenshots the docs show are those the admin's browser tests take, all of them.

``tests/admin/test_browser.py`` saves a screenshot at each step worth showing when
``LEASEJOBS_SCREENSHOTS=docs/images`` is set (CONTRIBUTING.md): a new screenshot there that
never reached docs/images, an image a page shows that is missing, or one nobody shows fails
here. The files stay small, as PNGs that a repository carries.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
BROWSER_TESTS = ROOT / "tests" / "admin" / "test_browser.py"
LARGEST = 200_000
"""Bytes: a full admin page at 1280 px wide is about 100 kB as a PNG."""

SHOWN = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def shown() -> set[Path]:
    found = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for target in SHOWN.findall(page.read_text(encoding="utf-8")):
            found.add((page.parent / target).resolve())
    return found


def taken() -> set[str]:
    return set(re.findall(r'"(admin-[\w-]+\.png)"', BROWSER_TESTS.read_text(encoding="utf-8")))


def test_every_screenshot_the_browser_tests_take_is_in_the_docs() -> None:
    assert "admin-dashboard.png" in taken()
    missing = sorted(name for name in taken() if not (IMAGES / name).exists())
    assert missing == [], f"LEASEJOBS_SCREENSHOTS=docs/images pytest -m browser: {missing}"
    unshown = sorted(name for name in taken() if (IMAGES / name).resolve() not in shown())
    assert unshown == [], f"screenshots no page shows: {unshown}"


def test_every_image_a_page_shows_exists_and_every_screenshot_is_shown() -> None:
    assert sorted(str(path) for path in shown() if not path.exists()) == []
    orphans = sorted(p.name for p in IMAGES.glob("*.png") if p.resolve() not in shown())
    assert orphans == []


def test_the_screenshots_are_small_pngs() -> None:
    for path in IMAGES.glob("*.png"):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path.name
        assert path.stat().st_size <= LARGEST, (path.name, path.stat().st_size)
