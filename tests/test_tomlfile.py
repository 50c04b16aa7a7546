"""User-supplied TOML files: every way of being unreadable is one line naming the file, and exit code 2."""

from __future__ import annotations

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.core.tomlfile import read_toml
from gate_helpers import fxprobe


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "profile file does not exist"),
    (lambda p: p.mkdir(), "is a folder, not a profile file"),
    (lambda p: p.write_bytes(b"name = \"\xff\xfe\"\n"), "profile file is not UTF-8 text"),
    (lambda p: p.write_text("[io\n"), "not valid TOML (Expected ']' at the end of a table declaration (at line 1"),
])
def test_unreadable_files_name_the_file_and_the_problem(tmp_path, make, message):
    path = tmp_path / "x.toml"
    make(path)
    with pytest.raises(BadInput) as info:
        read_toml(path, "profile file")
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


@pytest.mark.parametrize("args", [
    ("claims", "check", "{folder}"),
    ("gate", "g1", "--config", "{folder}", "--evidence", "{folder}"),
    ("profile", "show", "{folder}/missing.toml"),
    ("fault", "run", "{folder}/missing.toml"),
])
def test_cli_exits_2_on_an_unreadable_file(tmp_path, capsys, args):
    folder = tmp_path / "d"
    folder.mkdir()
    code = fxprobe(tmp_path, *[a.format(folder=folder) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert str(folder) in err
