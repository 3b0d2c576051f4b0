"""``django_leasejobs.fingerprints``: kept for migration 0006, which imports it by this name.

Migrations keep importing what they imported when they were written; the module lives in
:mod:`django_leasejobs.core.fingerprints`.
"""

from .core.fingerprints import of_errors

__all__ = ["of_errors"]
