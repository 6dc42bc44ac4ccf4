"""``host:port`` listen addresses and the loopback rule ([export] listen, and
any server the product opens), plus [export]'s validation in config.toml."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError
from sparktui.core.listen import Listen, is_loopback, parse_listen
from sparktui.core.terminal import strip_controls

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "host", "port", "loopback"), [
    ("127.0.0.1:9464", "127.0.0.1", 9464, True),
    ("127.8.9.1:1", "127.8.9.1", 1, True),
    ("[::1]:9464", "::1", 9464, True),
    ("localhost:8765", "localhost", 8765, True),
    ("0.0.0.0:9464", "0.0.0.0", 9464, False),
    ("192.0.2.10:9464", "192.0.2.10", 9464, False),
])
def test_parse(text: str, host: str, port: int, loopback: bool) -> None:
    got = parse_listen(text)
    assert (got.host, got.port, got.loopback) == (host, port, loopback)
    assert parse_listen(str(got)) == got


@pytest.mark.parametrize("text", ["", "9464", "127.0.0.1", "127.0.0.1:", ":9464",
                                  "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:99999999",
                                  "::1:9464", "[::1]9464", "spark.example:9464",
                                  "127.0.0.1:9464\n", " 127.0.0.1:9464", "127.0.0.1:+1"])
def test_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(text)


@given(st.text(max_size=40))
def test_any_text_parses_or_says_why(text: str) -> None:
    try:
        got = parse_listen(text)
    except ValueError as exc:
        assert str(exc)
    else:
        assert 1 <= got.port <= 65535 and got.loopback == is_loopback(got.host)


def test_loopback_is_an_address_not_a_name() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("localhost.evil.example") and not is_loopback("10.0.0.1")
    assert str(Listen("::1", 80)) == "[::1]:80"


def _config(tmp_path: Path, export: str) -> Path:
    text = (ROOT / "config.toml").read_text()
    path = tmp_path / "config.toml"
    path.write_text(text.replace('recipes_dir = "recipes"', f'recipes_dir = "{ROOT}/recipes"')
                    + "\n[export]\n" + export + "\n")
    return path


def test_export_is_off_by_default_and_loopback_unless_allowed(tmp_path: Path) -> None:
    assert load_config(ROOT / "config.toml").export.listen == ""
    ok = load_config(_config(tmp_path, 'listen = "127.0.0.1:9464"'))
    assert ok.export.listen == "127.0.0.1:9464"
    with pytest.raises(InputError) as err:
        path = _config(tmp_path, 'listen = "0.0.0.0:9464"')
        load_config(path)
    text = str(err.value.problems[0])
    line = path.read_text().splitlines().index('listen = "0.0.0.0:9464"') + 1
    assert text.startswith(f"{path}:{line}: export.listen: 0.0.0.0:9464 is not a loopback "
                           "address"), text  # file, line, key, and the way out:
    assert "set [export] allow_remote = true" in text
    assert load_config(_config(tmp_path, 'listen = "0.0.0.0:9464"\nallow_remote = true')) \
        .export.allow_remote
    with pytest.raises(InputError, match="port must be a number"):
        load_config(_config(tmp_path, 'listen = "127.0.0.1:http"'))


@pytest.mark.parametrize(("raw", "clean"), [
    ("\x1b[1;36m(APIServer pid=1)\x1b[0;0m ERROR boom", "(APIServer pid=1) ERROR boom"),
    ("title\x1b]0;pwned\x07 after", "title after"),
    ("bell\x07 and\rreturn\nnewline", "bell and return newline"),
    ("tab\tstays", "tab\tstays"),
    ("c1 \x9b31m csi", "c1  csi"),
    ("plain", "plain"),
    # sequences whose text used to survive them (issue 30's audit)
    ("a\x1b(Bb\x1b7c\x1bcd", "abcd"),                # charset, save cursor, reset
    ("8-bit \x9d0;pwned\x9c osc", "8-bit  osc"),      # C1 OSC with its payload
    ("\x9d2;t\x07x \x90q#0\x9cy", "x y"),              # C1 OSC BEL-ended, C1 DCS
    ("link \x1b]8;;http://x\x1b\\here\x1b]8;;\x1b\\", "link here"),
    ("one\u2028two\u2029three\x85four", "one two three four"),
    ("\u202eevil\u202c \u2066x\u2069", "evil x"),       # bidi overrides and isolates
])
def test_strip_controls(raw: str, clean: str) -> None:
    assert strip_controls(raw) == clean


@given(st.text(max_size=60) | st.lists(st.sampled_from(
    ["\x1b", "[", "]", "(", "0", ";", "m", "\x07", "\\", "\x9b", "\x9c", "\x9d", "\x90",
     "\u2028", "\u202e", "a", " "]), max_size=30).map("".join))
def test_strip_controls_leaves_no_escape(text: str) -> None:
    out = strip_controls(text)
    for c in out:  # no control, no line or paragraph break, no bidi control
        assert c == "\t" or unicodedata.category(c) not in ("Cc", "Zl", "Zp"), repr(out)
        assert c not in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067"
        assert c not in "\u2068\u2069"
    assert strip_controls(out) == out
