"""Dead letters grouped by error: the fingerprint column, its index, the group permissions.

Existing dead letters get their fingerprint here, computed from the last attempt's stored error
and traceback text exactly as a new dead letter's is, in batches of ``BATCH`` rows taken in
primary-key order (each batch is one SELECT and one UPDATE of its rows). Rows written by a
worker still running the previous release after this migration have an empty fingerprint until
``manage.py deadletters fingerprint`` computes it; the grouped page shows them as one group
and says so. The index is built after the backfill, so the backfill does not update it.
"""

from django.db import migrations, models

from django_leasejobs import fingerprints

BATCH = 500


def backfill(apps, schema_editor):
    DeadLetter = apps.get_model("django_leasejobs", "DeadLetter")
    rows = DeadLetter.objects.using(schema_editor.connection.alias)
    after_id = 0
    while True:
        batch = list(
            rows.filter(pk__gt=after_id, fingerprint="")
            .order_by("pk")
            .only("pk", "errors")[:BATCH]
        )
        if not batch:
            return
        for letter in batch:
            letter.fingerprint = fingerprints.of_errors(letter.errors).digest
        rows.bulk_update(batch, ["fingerprint"])
        after_id = batch[-1].pk


class Migration(migrations.Migration):

    dependencies = [
        ('django_leasejobs', '0005_partial_unique_keys'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='deadletter',
            options={'ordering': ['-id'], 'permissions': [('replay_deadletter', 'Can replay a dead letter'), ('replay_deadletter_group', 'Can replay a group of dead letters'), ('discard_deadletter_group', 'Can discard a group of dead letters')]},
        ),
        migrations.AddField(
            model_name='deadletter',
            name='fingerprint',
            field=models.CharField(blank=True, default='', editable=False, help_text="The error's key: its exception class and the handler's innermost frames (django_leasejobs.fingerprints); empty until computed for a row written before it.", max_length=32),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(fields=['fingerprint', 'name', 'created_at'], name='leasejobs_deadletter_groups'),
        ),
    ]
