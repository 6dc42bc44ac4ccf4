"""The last line of defence: a token loaded the usual way (env or 0600 file)
that some new code path prints or logs never reaches the operator, through
stdout, stderr or logging, including an exception's traceback in a log."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from sparktui.adapters.homeassistant import load_token
from sparktui.cli import main as cli_main

TOKEN = "tok-e9f1c2d3b4a5-never-shown"


@pytest.mark.parametrize("source", ["env", "file"])
def test_a_token_printed_or_logged_by_any_path_is_redacted(tmp_path, monkeypatch, capsys,
                                                           source):
    token = f"{TOKEN}-{source}"
    path = tmp_path / "ha_token"
    if source == "env":
        monkeypatch.setenv("SPARKTUI_TEST_TOKEN", token)
    else:
        path.write_text(token + "\n")
        path.chmod(0o600)
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    logging.getLogger().addHandler(handler)

    def leaky(argv: list[str]) -> int:
        load_token("SPARKTUI_TEST_TOKEN" if source == "env" else "", path)
        print(f"a new feature echoes {token}")
        print(f"and its error says {token}", file=sys.stderr)
        json.dump({"body": token}, sys.stdout)
        sys.stderr.writelines([f"{token}\n"])
        log = logging.getLogger("sparktui.somewhere.new")
        log.warning("calling with %s", token)
        try:
            raise RuntimeError(f"proxy said {token}")
        except RuntimeError:
            log.exception("failed")
        return 0

    monkeypatch.setattr(cli_main, "_dispatch", leaky)
    try:
        assert cli_main.main(["anything"]) == 0
    finally:
        logging.getLogger().removeHandler(handler)
    out, err = capsys.readouterr()
    text = out + err + logged.getvalue()
    assert token not in text
    assert "a new feature echoes <redacted>" in out and '{"body": "<redacted>"}' in out
    assert "and its error says <redacted>" in err
    assert "calling with <redacted>" in logged.getvalue()
    assert "RuntimeError: proxy said <redacted>" in logged.getvalue()
    # the guard is lifted when the command ends
    assert not type(sys.stdout).__name__.startswith("_Redacting")
    assert logging.getLogRecordFactory() is logging.LogRecord
