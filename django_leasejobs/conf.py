"""``django_leasejobs.conf.settings``: the documented name of the app's settings, kept working.

The settings live in :mod:`django_leasejobs.core.conf`; docs/settings.md and projects'
code read them as ``from django_leasejobs.conf import settings``, so this name stays.
"""

from .core.conf import PREFIX, Settings, settings

__all__ = ["PREFIX", "Settings", "settings"]
