"""With no server answering, the client commands print one line naming the URL and how to change it."""

from __future__ import annotations

import pytest

from leaderboard.cli import main

DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused


@pytest.mark.parametrize("command", [["show"], ["export", "csv"], ["submit", "BUNDLE"]])
def test_no_server_is_one_line_naming_the_url(command, tmp_path, capsys) -> None:
    bundle = tmp_path / "bundle.json"
    bundle.write_text("{}")
    argv = [str(bundle) if a == "BUNDLE" else a for a in command] + ["--server", DEAD]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error:") and DEAD in err
    assert "--server" in err and "MARFT_LEADERBOARD_URL" in err
