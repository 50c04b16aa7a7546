"""Nothing left running after a crash, in the session lab (issue 18 item 4, Must-show 3).

``kill -9`` of a fault run in its fault window, then ``fault restore``; ``kill -9`` of a soak in a
host guest, then ``soak --resume``: afterwards ``pgrep fio`` finds nothing on any guest, the links
and paths are live and md is clean or resyncing. Supersedes
test_fault_lab.py::test_kill_9_mid_drive_pull_then_fault_restore (same restore, plus the load).
FXPROBE_TEST_LAB=<name> runs it in a lab that is already up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from labcli import PARALLEL_LOAD, fault_env as env, fxprobe_argv as fxprobe, scenario_file, see_current_code

pytestmark = pytest.mark.lab

HOST = "host1"


def fio_on(lab, guest: str) -> list[str]:
    """`pgrep -a fio` in the guest: the fio processes that run there."""
    result = lab.exec(guest, ["pgrep", "-a", "fio"], timeout=60)
    return [line for line in result.stdout.splitlines() if line.strip()]


def wait_for(predicate, timeout: float, what: str, alive=None, step: float = 0.5):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if alive is not None:
            assert alive.poll() is None, f"{what}: the run ended early: {alive.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(step)
    return value


def assert_nothing_running_and_healthy(lab) -> None:
    for guest in ["array", *lab.hosts]:
        assert fio_on(lab, guest) == [], f"fio still runs in {guest}"
    lab.reload()
    for link in lab.links():
        assert link.up, f"link {link.n} of {link.host} is down"
    for host in lab.hosts:
        lab.wait_paths(host, lab.spec.subsystem_nqn, len(lab.links(host)), timeout=120)
    from fxprobe.faults.labprep import array_view
    main = next(m for m in array_view(lab)["md"] if m["level"] == lab.spec.raid)
    assert main["action"] in ("recovery", "resync") or main["health"] == "U" * main["raid_disks"], main


@pytest.mark.lab_parallel   # judges no time: the orphaned load runs 120 s, the restore's checks are states
def test_kill_9_of_a_fault_run_in_its_fault_window_then_fault_restore(lab, tmp_path):
    scenario = scenario_file(tmp_path, "link-down", timing={"steady_s": 3, "settle_s": 1, "fault_s": 120,
                                                               "recover_s": 2}, load=PARALLEL_LOAD)
    journal = tmp_path / "fault-journal.json"
    run = subprocess.Popen(fxprobe(tmp_path, "fault", "run", str(scenario), "--lab", lab.name), env=env(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: journal.exists() and '"lab-link"' in journal.read_text(), 300, "the link cut", run)
        loads = json.loads(journal.read_text())["entries"][0]["loads"]
        assert loads and loads[0]["guest"] == HOST and loads[0]["pid"] and loads[0]["argv"][0] == "fio"
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
    assert any(f"{loads[0]['pid']} fio" in line for line in fio_on(lab, HOST))   # the orphan runs on
    done = subprocess.run(fxprobe(tmp_path, "fault", "restore"), capture_output=True, text=True, timeout=300,
                          env=env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    restored = json.loads(done.stdout)["restored"]
    assert any(line.startswith(f"orphaned fio on lab {lab.name} {HOST} stopped (pid {loads[0]['pid']}")
               for line in restored), restored
    assert any("link 1" in line and " up" in line for line in restored), restored
    assert not journal.exists()
    assert_nothing_running_and_healthy(lab)


def main_namespace(lab) -> tuple[str, str]:
    nqn = lab.spec.subsystem_nqn
    script = (f'for s in /sys/class/nvme-subsystem/*; do [ "$(cat $s/subsysnqn)" = "{nqn}" ] || continue; '
              'for n in $s/nvme*n*; do [ -e "$n" ] && echo /dev/${n##*/} $(cat $s/serial); done; done')
    out = lab.exec(HOST, ["sh", "-c", script], timeout=60, check=True).stdout.split()
    return out[0], out[1]


# the orphaned fio must outlive the resume's start, or it ends by itself and there is nothing to stop: killed after
# its first 2 samples (~4 s of load), it has ~40 s left to run; the resume stopped it ~19 s after it was started
# (alone). One fio job: an orphan of 4 took the guest's CPU from the resume's Python start (45 s from the resume's
# exec to its first line of fxprobe code, ~6 s in a guest without a load)
SOAK_S = 30


@pytest.mark.lab_parallel   # judges no time: states, records and covered seconds from fio's own reports
def test_kill_9_of_a_soak_then_resume(lab, tmp_path):
    from fxprobe.core.runner import Runner
    device, serial = main_namespace(lab)
    see_current_code(lab, HOST)
    name = f"soak-kill-{os.getpid()}"
    guest_dir, host_dir = f"/fxlab/runs/{name}", lab.folder / HOST / "runs" / name
    # this checkout's fxprobe (the guest's `fxprobe` console script may point at another checkout)
    argv = lab.python("fxprobe.cli.main", "--json", "--run-dir", guest_dir, "soak", "small-file-dataset",
                      "--duration", f"{SOAK_S}s", "--target", device, "--allow-serial", serial, "--size", "16M",
                      "--sample", "5", "--set", "jobs=1")
    soak = Runner().start(argv, host=lab.guest(HOST), stdout_path=tmp_path / "soak.out",
                          stderr_path=tmp_path / "soak.err")
    records = host_dir / "soak.jsonl"
    t0 = time.time()
    say = lambda text: print(f"[{time.time() - t0:5.1f} s] {text}")
    try:
        # read through the lab share from this side: polling with a command in the guest every second took half
        # of its one emulated CPU and delayed the soak's own start by ~50 s (61 s from launch to its first record)
        wait_for(lambda: records.exists() and records.read_text().count('"type":"sample"') >= 2, 300,
                 "the soak's first samples", step=2)
    finally:
        killed = lab.exec(HOST, ["pkill", "-9", "-f", f"[r]un-dir {guest_dir} soak"], timeout=60)
        # the ssh session that started the soak stays open while the orphaned fio holds its output: close it from
        # this side (waiting for it waited ~50 s for the orphan to finish its run, and the resume found it ending)
        soak.stop(timeout=10)
        say("soak killed, its ssh session closed")
    assert killed.returncode == 0, "no soak to kill"
    state = json.loads((host_dir / "soak-state.json").read_text())
    left = fio_on(lab, HOST)     # fio's main process may die of SIGPIPE; its job processes can write on
    say(f"fio left running: {left}")
    killed_at = time.time()
    time.sleep(3)          # unmonitored load: must not count as covered
    done = lab.exec(HOST, lab.python("fxprobe.cli.main", "--json", "soak", "--resume", guest_dir), timeout=300)
    say("resume ended")
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr[-2000:]
    result = json.loads(done.stdout)
    [resume] = [json.loads(line) for line in records.read_text().splitlines() if '"type":"resume"' in line]
    # an fio seen right after the kill may still end on its own before the resume looks (ci28: the segment's fio,
    # seen 2 s after the kill, had ended 3 s + the resume's start later - "no orphaned fio"): either is right, and
    # nothing of the killed segment may run once the resume has looked (below, and assert_nothing_running at the end)
    assert resume["orphan"].startswith(("orphaned fio stopped", "no orphaned fio")), (left, resume)
    still = [line for line in fio_on(lab, HOST) if "soak.seg1.fio" in line]
    assert not still, (left, resume, still)
    assert state["fio"]["pid"]
    [gap] = [i for i in result["interruptions"] if i["kind"] == "gap"]
    assert gap["seconds"] >= 3 and result["unmonitored_s"] == gap["seconds"]
    # covered: monitored load only; the resumed segment runs ceil(remaining) s, and each segment's coverage is
    # read from fio's 1 s status reports: up to 1 s over per segment (61.154 s seen for 60 s)
    assert SOAK_S - 3 <= result["duration_s"] <= SOAK_S + 2, result["duration_s"]
    # verification goes on where it stopped (issue 14 Must-show 4): the killed segment's verify record is written by
    # the resume from its fio's stderr, the resumed segment verifies on, the whole region is read back at the end
    lines = [json.loads(line) for line in lab.exec(HOST, ["cat", f"{guest_dir}/soak.jsonl"], timeout=60,
                                                   check=True).stdout.splitlines() if line.strip()]
    samples = [r for r in lines if r["type"] == "sample"]
    verifies = [r for r in lines if r["type"] == "verify"]
    assert [v.get("seg") for v in verifies] == [1, 2, None], verifies
    assert verifies[0]["source"] == "load (read after the restart)"
    assert verifies[0]["verified_bytes"] == max(s["verified"] for s in samples if s["seg"] == 1) > 0
    assert result["verified_bytes"] == sum(v["verified_bytes"] for v in verifies) and result["mismatches"] == 0
    print(f"\nverified {result['verified_bytes'] / 2**20:.1f} MiB over 2 segments and the read-back, 0 mismatches")
    assert time.time() > killed_at
    assert_nothing_running_and_healthy(lab)
