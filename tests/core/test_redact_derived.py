"""Issue 27: an HA error body that echoed the token's first 12 characters or its
base64 form was printed, journaled and bundled (only the exact token was masked);
a token shorter than 6 characters was never masked. Now every derived form is
masked, and a short token is refused at load."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.adapters.homeassistant import TokenError, load_token
from sparktui.core.redact import MASK, MIN_TOKEN_CHARS, redact, register_secret

TOKEN = "abcDEF123/+=ghiJKL456-xyz_ZZZ.tail"


@pytest.fixture(autouse=True)
def _registered() -> None:
    register_secret(TOKEN)


@pytest.mark.parametrize("form", [
    TOKEN, TOKEN[:12], TOKEN[:6],
    base64.b64encode(TOKEN.encode()).decode(),
    base64.b64encode(TOKEN.encode()).decode()[:10],
    base64.urlsafe_b64encode(TOKEN.encode()).decode().rstrip("="),
    quote(TOKEN, safe=""),
])
def test_every_derived_form_is_masked(form: str) -> None:
    body = f"502 Bad Gateway: upstream said [{form}] (retry)"
    out = redact(body)
    assert form not in out and MASK in out
    assert out.startswith("502 Bad Gateway: upstream said [") and out.endswith("] (retry)")


def test_five_characters_of_it_are_not_a_token() -> None:
    assert redact(f"word {TOKEN[:5]} word") == f"word {TOKEN[:5]} word"


@given(st.text(max_size=40), st.integers(min_value=6, max_value=len(TOKEN)),
       st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_no_prefix_of_six_or_more_survives_any_surrounding(pre: str, n: int, post: str) -> None:
    assert TOKEN[:n] not in redact(pre + TOKEN[:n] + post)


def test_a_short_secret_cannot_be_registered() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        register_secret("x" * (MIN_TOKEN_CHARS - 1))


def test_a_short_token_is_refused_at_load_with_the_reason(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SHORT_TOKEN", "abc12")
    with pytest.raises(TokenError) as info:
        load_token("SHORT_TOKEN", tmp_path / "none")
    assert "5 characters" in str(info.value) and "$SHORT_TOKEN" in str(info.value)
    assert "abc12" not in str(info.value)
    f = tmp_path / "token"
    f.write_text("0123456789abcde\n")
    f.chmod(0o600)
    with pytest.raises(TokenError, match="15 characters"):
        load_token("", f)
    f.write_text("0123456789abcdef\n")
    assert repr(load_token("", f)) == "<token hidden>"
