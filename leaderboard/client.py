"""A small HTTP client for the leaderboard API (used by the CLI; usable from scripts)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
from typing_extensions import Self

from leaderboard.schema import Bundle, bundle_path

DEFAULT_SERVER = "http://127.0.0.1:8000"
SERVER_ENV = "MARFT_LEADERBOARD_URL"
TOKEN_ENV = "MARFT_LEADERBOARD_TOKEN"


class SubmissionError(RuntimeError):
    """The server refused a request; ``status`` is the HTTP status, the message its reason."""

    def __init__(self, status: int, detail: str):
        self.status = status
        self.detail = detail
        super().__init__(f"HTTP {status}: {detail}")


class ServerUnreachable(RuntimeError):
    """No leaderboard server answered at the URL (refused, unresolvable, or timed out)."""

    def __init__(self, server: str, exc: Exception):
        self.server = server
        super().__init__(
            f"no leaderboard server answers at {server} ({type(exc).__name__}: {exc}); start one "
            f"with `marft-leaderboard serve`, or point elsewhere with --server URL or {SERVER_ENV}"
        )


def default_server() -> str:
    return os.environ.get(SERVER_ENV, DEFAULT_SERVER)


class LeaderboardClient:
    """``LeaderboardClient("http://127.0.0.1:8000", token=...)``."""

    def __init__(self, server: str | None = None, token: str | None = None, timeout: float = 300.0):
        self.server = (server or default_server()).rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._http = httpx.Client(base_url=self.server, timeout=timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:  # connection refused, DNS, timeouts: not an HTTP answer
            raise ServerUnreachable(self.server, exc) from None

    def _json(self, response: httpx.Response) -> Any:
        if response.is_success:
            return response.json()
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise SubmissionError(response.status_code, str(detail))

    def submit_json(self, payload: bytes) -> dict[str, Any]:
        """POST a raw bundle JSON; returns the server's verdict (id, verified score, CI)."""
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return self._json(
            self._request("POST", "/api/submissions", content=payload, headers=headers)
        )

    def submit(self, bundle: Bundle | str | Path) -> dict[str, Any]:
        """Submit a :class:`Bundle`, a bundle ``.json`` file or a bundle directory."""
        if isinstance(bundle, Bundle):
            payload = bundle.model_dump_json().encode("utf-8")
        else:
            payload = bundle_path(bundle).read_bytes()
        return self.submit_json(payload)

    def leaderboard(self, env: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Leaderboard rows (best verified score first), optionally for one env id."""
        params = {k: v for k, v in {"env": env, **filters}.items() if v is not None}
        return self._json(self._request("GET", "/api/leaderboard", params=params))

    def submission(self, sub_id: int) -> dict[str, Any]:
        """One submission with per-episode details."""
        return self._json(self._request("GET", f"/api/submissions/{sub_id}"))
