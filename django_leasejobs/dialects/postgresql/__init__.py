"""PostgreSQL's dialect: its class (``dialect``) and its statements (``sql``, ``insert``,
``limited``, ``steps``)."""

from .dialect import PostgreSQLDialect

__all__ = ["PostgreSQLDialect"]
