import sys
import time

import pytest

from fxprobe.core.errors import NotRunnable, ToolError
from fxprobe.core.hosts import SshHost
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner


@pytest.fixture
def run(tmp_path):
    return RunDir.create(tmp_path, "test")


def test_run_records_argv_exit_code_output_and_timing(run):
    result = Runner(run).run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                             timeout=30, label="py")
    assert result.returncode == 3 and result.stdout == "out\n" and not result.ok
    [record] = list(run.commands())
    assert record["argv"][0] == sys.executable and record["exit_code"] == 3
    assert record["started"].endswith("Z") and record["ended"] >= record["started"]
    assert (run.raw / record["stdout"]).read_text() == "out\n"
    assert (run.raw / record["stderr"]).read_text() == "err\n"
    assert "PATH" in record["env"]


def test_shell_strings_are_refused(run):
    with pytest.raises(TypeError):
        Runner(run).run("echo hi", timeout=5)


def test_a_command_runs_in_the_folder_given_and_the_record_says_so(run, tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    result = Runner(run).run(["pwd"], timeout=10, cwd=folder)
    assert result.stdout.strip() == str(folder)
    assert list(run.commands())[0]["cwd"] == str(folder)
    with pytest.raises(ValueError, match="this machine"):
        Runner(run).run(["pwd"], timeout=10, cwd=folder, host=SshHost("n1", "192.0.2.1"))


@pytest.mark.alone   # a 0.3 s timeout measured on this machine's clock
def test_timeout_kills_and_is_recorded(run):
    result = Runner(run).run(["sleep", "5"], timeout=0.3)
    assert result.timed_out and result.returncode is None
    assert list(run.commands())[0]["timed_out"] is True
    with pytest.raises(ToolError, match="timed out"):
        result.check()


def test_missing_tool_is_not_runnable_with_install_hint(run):
    with pytest.raises(NotRunnable, match="apt-get install fio"):
        Runner(run).run(["/nonexistent/fio", "--version"], timeout=5)


def test_dry_run_records_without_running(run, tmp_path):
    marker = tmp_path / "touched"
    result = Runner(run, dry_run=True).run(["touch", str(marker)], timeout=5)
    assert result.dry_run and not marker.exists()
    assert list(run.commands())[0]["dry_run"] is True


def test_retries_only_when_asked(run, tmp_path):
    counter = tmp_path / "n"
    script = f"import pathlib,sys; p=pathlib.Path({str(counter)!r}); n=int(p.read_text() or 0) if p.exists() else 0; p.write_text(str(n+1)); sys.exit(0 if n >= 2 else 1)"
    result = Runner(run).run([sys.executable, "-c", script], timeout=10, attempts=5,
                             retry_if=lambda r: r.returncode == 1, retry_wait=0.01)
    assert result.ok and counter.read_text() == "3"
    assert [r["exit_code"] for r in run.commands()] == [1, 1, 0]


def test_background_is_recorded_when_stopped(run):
    job = Runner(run).start(["sleep", "30"], label="server")
    assert job.alive()
    job.stop(timeout=5)
    [record] = list(run.commands())
    assert record["background"] is True and record["exit_code"] is not None


def test_ssh_host_wraps_argv_quoted():
    host = SshHost("array", "127.0.0.1", port=2222)
    argv = host.wrap(["echo", "a b", "$HOME"])
    assert argv[0] == "ssh" and argv[-2] == "--" and argv[-1] == "echo 'a b' '$HOME'"
    assert "root@127.0.0.1" in argv


def test_manifest_hashes_every_file_and_detects_change(run):
    Runner(run).run(["echo", "hello"], timeout=5)
    run.write_results({"x": 1})
    manifest = run.finalize()
    assert "results.json" in manifest["files"] and "commands.jsonl" in manifest["files"]
    assert run.integrity() == []
    path = run.path / "results.json"
    data = bytearray(path.read_bytes()); data[0] ^= 1; path.write_bytes(bytes(data))
    assert run.integrity() == ["results.json: changed (SHA-256 differs from the manifest)"]


def test_ssh_that_never_reached_the_command_is_told_apart_from_a_failed_command():
    from fxprobe.core.hosts import never_connected
    from fxprobe.core.runner import CommandResult

    def result(code, err):
        return CommandResult(argv=("ssh",), host="host1", returncode=code, stdout="", stderr=err, started="", ended="",
                             seconds=10.0, timed_out=False, dry_run=False, name="x")
    # captured from a CI run: a TCG guest under a fio load did not send its banner within ConnectTimeout
    assert never_connected(result(255, "Connection timed out during banner exchange\n"))
    assert not never_connected(result(1, "cat: /sys/x: No such file or directory\n"))
    assert not never_connected(result(255, "fio: some error\n"))


@pytest.mark.alone   # the call returns within a time measured here
def test_a_command_whose_own_processes_keep_its_output_open_still_returns(tmp_path, monkeypatch):
    """fio's job processes live in sessions of their own and can outlive a killed main process while
    holding its output pipe; the call returns ORPHAN_GRACE_S after the command ended (+ DRAIN_S: its
    output did not end when the command's group was killed), and kills them."""
    import psutil
    from fxprobe.core import runner as runner_module
    monkeypatch.setattr(runner_module, "ORPHAN_GRACE_S", 1.0)
    monkeypatch.setattr(runner_module, "DRAIN_S", 0.5)
    marker = tmp_path / "orphan.pid"
    script = ("import subprocess, sys; p = subprocess.Popen(['sleep', '300'], start_new_session=True); "
              f"open({str(marker)!r}, 'w').write(str(p.pid)); sys.exit(3)")
    started = time.monotonic()
    result = Runner(RunDir.create(tmp_path, "t")).run([sys.executable, "-c", script], timeout=120)
    assert time.monotonic() - started < 30
    assert result.returncode == 3 and not result.timed_out
    orphan = int(marker.read_text())
    deadline = time.monotonic() + 10
    while psutil.pid_exists(orphan) and psutil.Process(orphan).status() != psutil.STATUS_ZOMBIE \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE


def test_input_reaches_a_command_that_takes_longer_than_one_poll(tmp_path):
    """The input is sent once, also when the command runs past the first poll (communicate is called again;
    a poll lasts at most 1 s)."""
    result = Runner(RunDir.create(tmp_path, "t")).run(["sh", "-c", "sleep 1.5; cat"], timeout=60, input="A 1\nB 2\n")
    assert result.returncode == 0 and result.stdout == "A 1\nB 2\n"
