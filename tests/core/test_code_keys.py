"""The code part of every cache key follows code, not prose: a docstring or comment edit keeps every
checkpoint, cell and encoder key; a one-token change of code in the same file changes them."""

import shutil

import pytest

from drift.core.closure import ROOT, code_digest, module_closure
from drift.store.cells import code_version

PARAMS = "drift/core/params.py"


def _keys(root):
    return (
        code_version("train", root=root),
        code_version("evaluate", root=root),
        code_version(
            "train", "drift.models.text_heads", ["drift.models.text_heads", "drift.models.image"], root=root
        ),
    )


@pytest.fixture
def copy(tmp_path):
    for name in ("drift", "stages"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_prose_edits_keep_every_key(copy):
    before = _keys(copy)
    path = copy / PARAMS
    source = path.read_text()
    edited = source.replace(
        '"""The typed schema of params.yaml', '"""The typed (and checked) schema of params.yaml', 1
    )
    line = next(ln for ln in source.splitlines() if ln.startswith("    epochs: "))
    edited = edited.replace(line, f"    # a comment a reader added\n{line}  # five", 1)
    assert edited != source
    path.write_text(edited + "\n\n# trailing note\n")
    assert _keys(copy) == before


def test_a_one_token_code_change_changes_every_key(copy):
    before = _keys(copy)
    path = copy / PARAMS
    source = path.read_text()
    line = next(ln for ln in source.splitlines(keepends=True) if ln.startswith("    epochs: "))
    changed = line.replace("Field(5,", "Field(6,")  # the default epochs: one token
    assert changed != line
    path.write_text(source.replace(line, changed, 1))
    after = _keys(copy)
    assert all(a != b for a, b in zip(after, before))


def test_the_encoder_fingerprint_code_follows_code(copy):
    def digest():
        return code_digest(module_closure("drift.encoders.text", copy), copy)

    before = digest()
    path = copy / "drift" / "encoders" / "text.py"
    source = path.read_text()
    path.write_text("# a header comment\n" + source.replace('"""', '"""Edited prose. ', 1))
    assert digest() == before
    assert "hidden = out.last_hidden_state.float()" in source
    path.write_text(
        source.replace("hidden = out.last_hidden_state.float()", "hidden = out.last_hidden_state.double()")
    )
    assert digest() != before


def test_a_function_docstring_is_prose_but_a_string_statement_later_is_code(copy):
    from drift.core.closure import code_text

    module = copy / "drift" / "core" / "probe_module.py"
    module.write_text('def f():\n    """Doc."""\n    return 1\n')
    plain = code_text(module)
    module.write_text('def f():\n    """Other doc, longer."""\n    return 1\n')
    assert code_text(module) == plain
    module.write_text("def f():\n    return 2\n")
    assert code_text(module) != plain
