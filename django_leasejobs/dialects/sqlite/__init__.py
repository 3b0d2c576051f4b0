"""SQLite's dialect: its class and statements (``dialect``)."""

from .dialect import SQLiteDialect

__all__ = ["SQLiteDialect"]
