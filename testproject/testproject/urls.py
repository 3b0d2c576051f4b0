from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("jobs/", include("django_leasejobs.urls")),
    path("jobs/api/", include("django_leasejobs.api.urls")),
]
