"""The public path of the app's database router: ``django_leasejobs.routers.JobsRouter``.

Put it in ``DATABASE_ROUTERS`` beside ``LEASEJOBS_DATABASE`` (docs/databases.md); the class
lives in :mod:`django_leasejobs.db.routing`, with the layer that chooses databases.
"""

from .db.routing import JobsRouter

__all__ = ["JobsRouter"]
