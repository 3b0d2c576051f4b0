from django.apps import AppConfig


class TestappConfig(AppConfig):
    name = "testapp"
    default_auto_field = "django.db.models.BigAutoField"
