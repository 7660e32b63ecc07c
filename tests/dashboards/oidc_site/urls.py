from django.contrib.auth import views
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", views.LoginView.as_view(), name="login"),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
]
