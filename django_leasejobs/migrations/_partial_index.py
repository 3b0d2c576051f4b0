"""An index on waiting jobs added without stopping claims or enqueues (migrations 0014, 0015).

``CREATE INDEX CONCURRENTLY`` on PostgreSQL (its migration must be ``atomic = False``). MySQL
and MariaDB ignore index conditions, so there the index would hold every row and be rewritten
by every claim and completion: it is not built there. SQLite runs the plain statement. The
migration state is what the model says. (The loader skips this module: its name starts with _.)
"""

from django.db import migrations


def add_partial_index(index):
    """The operation that adds ``index`` to the job table as described above."""

    def forwards(apps, schema_editor):
        Job = apps.get_model("django_leasejobs", "Job")
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
            schema_editor.execute(index.create_sql(Job, schema_editor, concurrently=True))
        elif vendor != "mysql":
            schema_editor.add_index(Job, index)

    def backwards(apps, schema_editor):
        Job = apps.get_model("django_leasejobs", "Job")
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
        elif vendor != "mysql":
            schema_editor.remove_index(Job, index)

    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(forwards, backwards)],
        state_operations=[migrations.AddIndex(model_name="job", index=index)],
    )
