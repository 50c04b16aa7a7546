"""Tool versions in the environment log: read once per binary, read again when the binary changes."""

from __future__ import annotations

import json
import os

from fxprobe.core.runner import Runner
from fxprobe.host import environment, preflight
from fxprobe.host.doctor import ToolProbe, probe_tool, with_origins
from fxprobe.host.tool_versions import ToolVersionCache
from fxprobe.tools import dpkg, fio


def tool(tmp_path, version: str):
    """A program on PATH that answers its version and counts how often it was asked."""
    script = tmp_path / "bin" / "fakefio"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\necho x >> {tmp_path}/asked\necho fio-{version}\n")
    script.chmod(0o755)
    return ToolProbe("fio", ("fakefio", "--version"), fio.VERSION_PATTERN)


def asked(tmp_path) -> int:
    return len((tmp_path / "asked").read_text().splitlines()) if (tmp_path / "asked").exists() else 0


def test_a_version_is_read_once_per_binary_and_again_when_the_binary_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    probe = tool(tmp_path, "3.33")
    cache_file = tmp_path / "cache" / "tool-versions.json"
    read = {}

    def ask():            # as one command's environment log does: the cache read, the versions asked, saved
        cache = ToolVersionCache(cache_file)
        version = probe_tool(Runner(None), probe, cache, read).version
        cache.save()
        return version

    first = ask()
    stamp = read["fio"]
    again = ask()
    assert (first, again, asked(tmp_path)) == ("3.33", "3.33", 1)
    assert read["fio"] == stamp                                   # the stamp of the answer used: the first
    tool(tmp_path, "3.36")                                        # the binary replaced: size, mtime and ctime move
    assert ask() == "3.36"
    assert asked(tmp_path) == 2 and read["fio"] > stamp
    # doctor and preflight ask every time (no cache)
    assert probe_tool(Runner(None), probe).version == "3.36" and asked(tmp_path) == 3


def test_a_broken_or_unwritable_cache_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    probe = tool(tmp_path, "3.33")
    cache_file = tmp_path / "tool-versions.json"
    cache_file.write_text('{"versions": {"fio": {"argv": 1}}}')          # not the schema: read as empty
    cache = ToolVersionCache(cache_file)
    assert probe_tool(Runner(None), probe, cache).version == "3.33"
    cache.save()
    assert json.loads(cache_file.read_text())["versions"]["fio"]["output"].startswith("fio-3.33")
    blocked = ToolVersionCache(tmp_path / "a-file" / "tool-versions.json")
    (tmp_path / "a-file").write_text("")                                  # its folder cannot be made
    assert probe_tool(Runner(None), probe, blocked).version == "3.33"
    blocked.save()                                                         # no error: read again next time


def test_the_environment_log_says_when_each_version_was_read(tmp_path, monkeypatch):
    monkeypatch.setenv("FXPROBE_CACHE", str(tmp_path))
    log = preflight.collect(Runner(None), tool_cache=ToolVersionCache()).to_dict()
    read = log["items"]["tool_versions_read"]
    assert read["cache"] == str(tmp_path / "tool-versions.json") and "ctime" in read["rule"]
    assert set(log["items"]["tools"]) <= set(read["read"])
    environment._collected.cache_clear()
    try:
        assert environment.snapshot()["items"]["tool_versions_read"]["cache"] == read["cache"]
    finally:
        environment._collected.cache_clear()


def test_a_binary_s_origin_is_kept_beside_its_version_and_asked_again_when_the_binary_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    probe = tool(tmp_path, "3.33")
    cache_file = tmp_path / "cache" / "tool-versions.json"

    def origin():        # as one command's environment log does
        cache = ToolVersionCache(cache_file)
        cap, = with_origins(Runner(None), [probe_tool(Runner(None), probe, cache)], cache)
        cache.save()
        return cap.origin

    first = origin()
    assert first.state == dpkg.UNPACKAGED and first.path == str(tmp_path / "bin" / "fakefio")
    assert json.loads(cache_file.read_text())["versions"]["fio"]["origin"]["sha256"] == first.sha256
    assert origin() == first and asked(tmp_path) == 1      # neither the version nor the origin asked again
    with open(tmp_path / "bin" / "fakefio", "a") as script:
        script.write("# changed\n")
    again = origin()
    assert asked(tmp_path) == 2 and again.sha256 != first.sha256


def test_a_version_printed_with_a_failing_exit_code_is_kept_and_a_failure_without_one_is_asked_again(tmp_path,
                                                                                                    monkeypatch):
    """ib_read_bw --version prints 'Version: 6.06' and exits 1: kept like any answer (it was asked at every command,
    a third of a second each in a lab guest); a binary that prints no version is asked again."""
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    probe = tool(tmp_path, "3.33")
    script = tmp_path / "bin" / "fakefio"
    script.write_text(script.read_text() + "exit 1\n")
    cache_file = tmp_path / "cache" / "tool-versions.json"
    for _ in range(2):
        cache = ToolVersionCache(cache_file)
        assert probe_tool(Runner(None), probe, cache).version == "3.33"
        cache.save()
    assert asked(tmp_path) == 1
    script.write_text(f"#!/bin/sh\necho x >> {tmp_path}/asked\necho no version here\nexit 1\n")
    for _ in range(2):
        cache = ToolVersionCache(cache_file)
        assert probe_tool(Runner(None), probe, cache).version == ""
        cache.save()
    assert asked(tmp_path) == 3
