"""MariaDB's and MySQL's dialect (``dialect``)."""

from .dialect import MySQLDialect

__all__ = ["MySQLDialect"]
