"""G1 self-test over the array guest's captured sysfs and nvme-cli output (tests/fixtures/lab/selftest-array): the
honest 24 drives pass (emulated drives named), and each way the review made a failing array pass now fails."""

from __future__ import annotations

import json
import shutil

import pytest

from fxprobe.cli.main import main
from fxprobe.core import sysfs
from sysfs_tree import STANDIN, build, write

EMULATED = ["--emulated-drives", "QEMU NVMe Ctrl"]


@pytest.fixture
def array(tmp_path, monkeypatch):
    root = build(tmp_path / "root")
    monkeypatch.setattr(sysfs, "ROOT", root)
    monkeypatch.setenv("PATH", f"{STANDIN}:{__import__('os').environ['PATH']}")
    return root


def selftest(tmp_path, capsys, *args) -> tuple[int, dict, str]:
    code = main(["--runs", str(tmp_path / "runs"), "--json", "selftest", *args])
    out = capsys.readouterr().out
    return code, json.loads(out), out


def criteria(results: dict) -> dict:
    return {c["name"]: c for c in results["verdict"]["criteria"]}


def controller(root, name: str) -> str:
    return (root / f"sys/class/nvme/{name}/serial").read_text().strip()


def test_the_array_s_24_emulated_drives_pass_and_say_so(tmp_path, capsys, array):
    code, results, _ = selftest(tmp_path, capsys, *EMULATED)
    assert code == 0, [c for c in results["verdict"]["criteria"] if c["outcome"] != "pass"]
    c = criteria(results)
    assert results["drives_recognized"] == 24 and results["controllers"] == 24 and results["not_counted"] == []
    assert c["nvme-cli agrees with sysfs"]["measured"] == "24/24"
    assert c["namespace usable (>= 1, size > 0, not read-only)"]["measured"] == "24/24"
    assert "24 drive(s) of model 'QEMU NVMe Ctrl' report 0 % with threshold 0 %: emulated drives " \
           "(--emulated-drives), their spare not judged" in c["available spare >= max(threshold, 10 %)"]["detail"]
    assert results["sysfs_root"] == str(array) and results["drives"][0]["namespaces"][0]["size_bytes"] == 128 << 20


def test_zero_spare_with_threshold_zero_fails_without_the_drives_named_emulated(tmp_path, capsys, array):
    code, results, _ = selftest(tmp_path, capsys)
    spare = criteria(results)["available spare >= max(threshold, 10 %)"]
    assert code == 1 and spare["outcome"] == "fail" and spare["measured"] == "0/24 judged drives"


def test_a_controller_repeating_a_serial_is_not_a_drive_and_fails(tmp_path, capsys, array):
    for attr in ("serial", "subsysnqn"):        # nvme23 reports nvme0's identity: 23 drives in 24 controllers
        write(array, f"/sys/class/nvme/nvme23/{attr}", (array / f"sys/class/nvme/nvme0/{attr}").read_text())
    code, results, _ = selftest(tmp_path, capsys, *EMULATED)
    c = criteria(results)
    assert code == 1 and results["drives_recognized"] == 23 and c["drives recognized"]["outcome"] == "fail"
    assert f"{controller(array, 'nvme0')} reported by nvme0, nvme23" in c["serial numbers unique"]["detail"]


def test_fabrics_controllers_are_no_drives_of_this_box_unless_asked(tmp_path, capsys, array):
    """12 drives each seen through 2 RDMA controllers: no PCIe drive here (0); counted when asked: 12, not 24."""
    for n in range(24):
        write(array, f"/sys/class/nvme/nvme{n}/transport", "rdma\n")
        for attr in ("serial", "subsysnqn"):
            write(array, f"/sys/class/nvme/nvme{n}/{attr}",
                  (array / f"sys/class/nvme/nvme{n % 12}/{attr}").read_text())
    code, results, out = selftest(tmp_path, capsys, *EMULATED)
    assert code == 1 and results["drives_recognized"] == 0
    assert "24 fabrics controller(s) (rdma: nvme0, nvme1, nvme2" in results["not_counted"][0]
    code, results, _ = selftest(tmp_path, capsys, *EMULATED, "--include-fabrics")
    assert code == 1 and results["drives_recognized"] == 12 and results["controllers"] == 24
    assert criteria(results)["serial numbers unique"]["outcome"] == "fail"


def test_the_host_s_system_drive_is_not_an_array_drive(tmp_path, capsys, array):
    """23 drives and the host's boot NVMe (it holds /): 23 recognized."""
    (array / "sys/class/block").mkdir(parents=True, exist_ok=True)
    (array / "sys/class/block/nvme23n1").symlink_to("../../block/nvme23n1")
    dev = (array / "sys/block/nvme23n1/dev").read_text().strip()
    write(array, "/proc/self/mountinfo", f"29 1 {dev} / / rw,relatime - ext4 /dev/nvme23n1 rw\n")
    code, results, _ = selftest(tmp_path, capsys, *EMULATED)
    assert code == 1 and results["drives_recognized"] == 23
    assert results["not_counted"] == [f"nvme23 (pcie, serial {controller(array, 'nvme23')}): holds / (nvme23n1): "
                                      "the host's system drive, not an array drive"]


@pytest.mark.parametrize("plant, problem", [
    (lambda root: (shutil.rmtree(root / "sys/class/nvme/nvme5/nvme5n1"), shutil.rmtree(root / "sys/block/nvme5n1")),
     "no namespace"),
    (lambda root: write(root, "/sys/block/nvme5n1/size", "0\n"), "nvme5n1 has size 0 B"),
    (lambda root: write(root, "/sys/block/nvme5n1/ro", "1\n"), "nvme5n1 is read-only"),
])
def test_a_drive_without_a_usable_namespace_fails(tmp_path, capsys, array, plant, problem):
    plant(array)
    code, results, _ = selftest(tmp_path, capsys, *EMULATED)
    usable = criteria(results)["namespace usable (>= 1, size > 0, not read-only)"]
    assert code == 1 and usable["measured"] == "23/24"
    assert f"{controller(array, 'nvme5')} (nvme5): {problem}" in usable["detail"]


def test_nvme_cli_disagreeing_fails_and_a_failing_nvme_list_is_an_error(tmp_path, capsys, array, monkeypatch):
    serial = controller(array, "nvme7")
    monkeypatch.setenv("NVME_STANDIN_LIST_DROP", serial)
    code, results, _ = selftest(tmp_path, capsys, *EMULATED)
    agree = criteria(results)["nvme-cli agrees with sysfs"]
    assert code == 1 and agree["outcome"] == "fail" and f"{serial} (nvme7): in sysfs, not in nvme list" in agree["detail"]
    monkeypatch.setenv("NVME_STANDIN_LIST_FAIL", "1")
    code, results, _ = selftest(tmp_path, capsys, *EMULATED)
    agree = criteria(results)["nvme-cli agrees with sysfs"]
    assert code == 4 and agree["outcome"] == "error"
    assert "`nvme list -o json` exited 1: Failed to scan topology" in agree["detail"]

# -- the G1 gate re-judges each self-test (review G1 items 5, 6) ------------------------------------------------------
def gate_g1(tmp_path, capsys, *runs) -> tuple[int, dict]:
    args = [a for run in runs for a in ("--evidence", str(run))]
    code = main(["--runs", str(tmp_path / "gates"), "--json", "gate", "g1", *args])
    return code, json.loads(capsys.readouterr().out)


def test_a_worn_drive_passed_with_lax_self_test_limits_fails_the_gate_and_a_redirected_sysfs_is_refused(
        tmp_path, capsys, array, monkeypatch):
    monkeypatch.setenv("NVME_STANDIN_SMART", json.dumps({"nvme5": {"media_errors": "5000", "percent_used": 250,
                                                                   "avail_spare": 1, "spare_thresh": 0}}))
    write(array, "/sys/class/nvme/nvme6/firmware_rev", "0.9-beta\n")
    code, results, _ = selftest(tmp_path, capsys, *EMULATED, "--max-media-errors", "100000", "--max-percent-used",
                                "255", "--min-spare", "0", "--allow-mixed-firmware")
    assert code == 0 and results["limits"]["max_media_errors"] == 100000      # the self-test it was asked for passes
    code, gate = gate_g1(tmp_path, capsys, results["run_dir"])
    c = criteria(gate)
    assert code == 4 and c["self-test passed"]["outcome"] == "pass"
    root = c["self-test read this machine's sysfs"]
    assert root["outcome"] == "error" and root["measured"] == str(array) and "FXPROBE_SYSROOT" in root["detail"]
    media, wear, spare = c["media errors (re-judged)"], c["wear (re-judged)"], c["available spare (re-judged)"]
    assert (media["outcome"], media["measured"], media["threshold"]) == ("fail", 5000, 0)
    assert "nvme5" in media["detail"] and "the self-test ran with --max-media-errors 100000" in media["detail"]
    assert (wear["outcome"], wear["measured"], wear["threshold"]) == ("fail", 250, 90)
    assert spare["outcome"] == "fail" and spare["measured"] == 1 and "--min-spare 0" in spare["detail"]
    firmware = c["firmware versions (re-judged)"]
    assert firmware["outcome"] == "fail" and firmware["measured"] == 2 and "--allow-mixed-firmware" in firmware["detail"]
    assert c["drives without spare accounting"]["measured"] == 23       # QEMU's: the buyer's 0 fails them too


def test_the_gate_passes_a_healthy_self_test_of_this_machine_and_not_one_that_did_not_say_where_it_read(
        tmp_path, capsys):
    from gate_helpers import fake_run, produced_selftest
    healthy = fake_run(tmp_path / "ev", "selftest", produced_selftest(24))
    code, gate = gate_g1(tmp_path, capsys, healthy)
    assert code == 0, [c for c in gate["verdict"]["criteria"] if c["outcome"] != "pass"]
    older = produced_selftest(24)
    del older["sysfs_root"]
    code, gate = gate_g1(tmp_path, capsys, fake_run(tmp_path / "ev", "selftest", older))
    root = criteria(gate)["self-test read this machine's sysfs"]
    assert code == 3 and root["outcome"] == "not run" and "does not record which sysfs root" in root["detail"]
