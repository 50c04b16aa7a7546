import json

from fxprobe.cli.main import main

EXPECTED = {"kernel", "distro", "cpu", "memory", "numa", "cpu_governor", "cstates", "nics", "rdma_devices",
            "nvme_controllers", "gpus", "tools", "tool_origins", "page_cache", "write_cache", "clock", "sensors"}


def test_preflight_fills_or_explains_every_item(tmp_path, capsys):
    code = main(["--run-dir", str(tmp_path / "run"), "--json", "preflight"])
    assert code == 0
    env = json.loads((tmp_path / "run" / "environment.json").read_text())
    missing = {m["item"]: m["reason"] for m in env["missing"]}
    assert EXPECTED <= set(env["items"]) | set(missing)
    assert all(reason for reason in missing.values())
    # this machine has no RDMA and no NVMe: listed as missing with a reason, not dropped
    assert "rdma_devices" in missing or env["items"].get("rdma_devices")
    assert env["items"]["tools"]["fio"].startswith("3.")
    for warning in env["warnings"]:
        assert warning["fix"] and warning["observed"]
    assert "environment.json" in json.loads((tmp_path / "run" / "manifest.json").read_text())["files"]
