"""The database's clock as a query expression: the only "now" the protocol compares against."""

from __future__ import annotations

from typing import Any

from django.db.models.functions import Now


class DbNow(Now):
    """``Now()``, with SQLite's millisecond clock written in Django's microsecond format.

    Django stores SQLite datetimes as text with six fractional digits, but SQLite's clock has
    three, so ``'12:00:00.345000' <= '12:00:00.345'`` is false as text: a job due in the
    current millisecond would look not yet due. Padding the clock to six digits makes text
    order equal time order again (the clock reads up to 1 ms early, never late).
    """

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            template="STRFTIME('%%%%Y-%%%%m-%%%%d %%%%H:%%%%M:%%%%f000', 'NOW')",
            **extra_context,
        )
