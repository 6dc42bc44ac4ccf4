"""scripts/engine_dialects.py reads a wheel's source, never imports it: the
string a logger call, a ``raise`` or an assignment builds, with its line; a
vanished anchor is an error naming it (the release diff we want to see)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "engine_dialects.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("engine_dialects", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


SOURCE = '''
import logging
logger = logging.getLogger(__name__)

def f(kv, method):
    logger.info(
        "%s KV cache size: %s tokens, "
        "Maximum concurrency for %s tokens per request: %.2fx",
        "GPU", 1, 2, 3.0)
    msg = (f"Initial free memory {format_gib(kv)} "
           f"GiB, reserved {kv:.2f}GiB memory")
    raise TimeoutError(f"RPC call to {method} timed out.") from None
'''


def test_strings_are_read_with_their_line(script, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    files = script.read_wheel(tmp_path)
    kv = script._entry(files["pkg/m.py"], "pkg/m.py", '"%s KV cache size')
    assert kv == {"source": "pkg/m.py:6", "text": "%s KV cache size: %s tokens, Maximum "
                  "concurrency for %s tokens per request: %.2fx"}
    pin = script._entry(files["pkg/m.py"], "pkg/m.py", "Initial free memory")
    assert pin["text"] == "Initial free memory {format_gib(kv)} GiB, reserved {kv:.2f}GiB memory"
    rpc = script._entry(files["pkg/m.py"], "pkg/m.py", "RPC call to")
    assert rpc == {"source": "pkg/m.py:12", "text": "RPC call to {method} timed out."}


MODELS = '''
class ChatMessage(Base):
    reasoning_content: Optional[str] = None

class DeltaMessage(Base):
    role: str | None = None
    reasoning_content: Optional[str] = None

def load(files):
    with (
        open(files) as f,
        tqdm(
            total=f.size,
            desc="Loading safetensors using InstantTensor loader",
            unit="B",
        ) as pbar,
    ):
        pass
'''


def test_a_field_of_one_class_and_a_keyword_literal(script) -> None:
    """``A >> B``: the field of the class the stream sends (vLLM 0.11 and SGLang
    declare ``reasoning_content`` on the request's message too, first); a
    keyword argument inside a call spanning lines gives its string."""
    delta = script._entry(MODELS, "m.py", "class DeltaMessage(Base): >>     reasoning_content")
    assert delta == {"source": "m.py:7", "text": "reasoning_content: Optional[str] = None"}
    with pytest.raises(script.AnchorMissing, match="class Delta"):
        script._entry(MODELS, "m.py", "class Delta(Base): >>     reasoning_content")
    bar = script._entry(MODELS, "m.py", 'desc="Loading safetensors using InstantTensor')
    assert bar == {"source": "m.py:14", "text": "Loading safetensors using InstantTensor loader"}


def test_a_vanished_anchor_names_itself(script, tmp_path: Path) -> None:
    with pytest.raises(script.AnchorMissing, match="Loading model from scratch"):
        script.build("vllm-0.33", {"vllm/v1/worker/gpu/model_runner.py": "x = 1\n"})


def test_the_docs_table_is_the_fixtures(script) -> None:
    doc = (SCRIPT.parents[1] / "docs" / "DIALECTS.md").read_text("utf-8")
    assert doc.endswith(script.doc_table())
