"""PostgreSQL's dialect: its class (``dialect``), its statements (``sql``, the fragments;
``insert``, ``limited``, ``steps``), how it loads rows (``job_rows``), what its session's
client encoding lets through (``client_encoding``) and its NOTIFY (``notify``)."""

from .dialect import PostgreSQLDialect

__all__ = ["PostgreSQLDialect"]
