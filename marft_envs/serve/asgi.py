"""``uvicorn marft_envs.serve.asgi:app``: the server of ``$MARFT_ENV_ID`` (default arith-3agent)."""

from .app import app_from_environ

app = app_from_environ()
