"""nvme-cli adapter: 2.x and 1.x JSON shapes, strings as numbers, Kelvin, lab captures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.runner import Runner
from fxprobe.tools import nvme

FIXTURES = Path(__file__).parent / "fixtures" / "nvme"
LAB = Path(__file__).parent / "fixtures" / "lab"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_list_2x_and_1x():
    new = nvme.parse_list(read("list-2.x-built.json"), "list2")
    assert [n.serial for n in new] == ["fxdrive00", "fxdrive01"]
    assert new[0].name == "nvme0n1" and new[0].nsid == 1 and new[0].generic_path == "/dev/ng0n1"
    old = nvme.parse_list(read("list-1.x-built.json"), "list1")
    assert old[0].serial == "8e3c0a7f1d6b2c94" and old[0].model == "Linux" and old[0].firmware == "1.0"
    assert old[0].physical_size == 1 << 30


def test_list_verbose_2x_multipath():
    (subsystem,) = nvme.parse_list_verbose(read("list-v-2.x-built.json"))
    assert subsystem.nqn == "nqn.2026-12.io.fxprobe:array" and subsystem.host_nqn.startswith("nqn.2014-08")
    assert [c.name for c in subsystem.controllers] == ["nvme0", "nvme1"]
    assert subsystem.controllers[1].address_fields == {"traddr": "10.10.2.1", "trsvcid": "4420", "src_addr": "10.10.2.2"}
    assert subsystem.controllers[0].paths[0].ana_state == "optimized"
    assert subsystem.namespaces[0].name == "nvme0n1" and subsystem.namespaces[0].nsid == 1


def test_list_verbose_1x():
    (subsystem,) = nvme.parse_list_verbose(read("list-v-1.x-built.json"))
    controller = subsystem.controllers[0]
    assert controller.serial == "8e3c0a7f1d6b2c94" and controller.firmware == "5.10.0"
    assert controller.address_fields == {"traddr": "10.10.1.1", "trsvcid": "4420"}
    assert controller.namespaces[0].name == "nvme0n1"


def test_discover_tcp_and_rdma():
    log = nvme.parse_discover(read("discover-tcp-2.x-built.json"))
    assert log.genctr == 3 and len(log.records) == 2
    (record,) = log.subsystems()
    assert (record.trtype, record.traddr, record.trsvcid, record.portid) == ("tcp", "10.10.1.1", "4420", 1)
    rdma = nvme.parse_discover(read("discover-rdma-2.x-built.json")).records[0]
    assert rdma.rdma_cms == "rdma-cm" and rdma.rdma_qptype == "connected"


def test_smart_log_23_strings_and_kelvin():
    log = nvme.parse_smart_log(read("smart-log-2.3-built.json"))
    assert log.temperature_k == 323 and log.temperature_c == pytest.approx(49.85)
    assert log.data_units_read == 4123 and log.bytes_read == 4123 * 512_000
    assert log.data_units_written == 2**128 - 1          # a 128-bit counter, exact
    assert log.avail_spare == 0 and log.spare_thresh == 0 and not log.spare_below_threshold


def test_smart_log_1x_numbers():
    log = nvme.parse_smart_log(read("smart-log-1.x-built.json"))
    assert log.power_on_hours == 12004 and log.num_err_log_entries == 41 and log.percent_used == 3
    assert log.to_dict()["temperature_c"] == pytest.approx(36.85)


def test_smart_log_missing_temperature():
    with pytest.raises(ParseError) as info:
        nvme.parse_smart_log('{"critical_warning": 0}', "nvme smart-log /dev/nvme0")
    assert info.value.field == "temperature" and "nvme smart-log /dev/nvme0" in str(info.value)


def test_fabrics_smart_log_without_temperature():
    text = read("smart-log-2.3-built.json").replace('"temperature":323', '"temperature":0')
    assert nvme.parse_smart_log(text).temperature_c is None


def test_connect_and_disconnect_results():
    ok = nvme.parse_connect("", "", 0)
    assert ok.ok and ok.device == ""
    assert nvme.parse_connect('{\n  "device" : "nvme3"\n}\n', "", 0).device == "nvme3"
    refused = nvme.parse_connect("", "Failed to write to /dev/nvme-fabrics: Connection refused\n", 1)
    assert not refused.ok and "Connection refused" in refused.message
    already = nvme.parse_connect("", "Failed to write to /dev/nvme-fabrics: Operation already in progress\n", 114)
    assert already.already_connected
    assert nvme.parse_disconnect(read("disconnect-2.x-built.txt")) == 2
    with pytest.raises(ParseError, match="disconnected"):
        nvme.parse_disconnect("", "nvme disconnect -n x")


def test_argv():
    assert nvme.connect_argv(transport="tcp", traddr="10.10.1.1", nqn="nqn.x", ctrl_loss_tmo=30,
                             host_traddr="10.10.1.2") == [
        "nvme", "connect", "-t", "tcp", "-a", "10.10.1.1", "-s", "4420", "-n", "nqn.x",
        "--host-traddr", "10.10.1.2", "--ctrl-loss-tmo", "30"]


def test_real_nvme_cli_here():
    """This machine has nvme-cli 2.3 but no NVMe devices or fabrics: probes say so, list fails cleanly."""
    runner = Runner()
    assert nvme.probe_nvme_cli(runner) is None
    if not Path("/dev/nvme-fabrics").exists():
        assert "nvme-fabrics" in nvme.probe_nvme_fabrics(runner)
    if not Path("/sys/class/nvme").exists():
        with pytest.raises(ToolError, match="nvme list"):
            nvme.run_list(runner)


# -- real outputs captured in the QEMU lab guests --------------------------------------
PARSER_BY_NAME = [  # first match wins
    (re.compile(r"disconnect"), nvme.parse_disconnect),
    (re.compile(r"connect"), lambda text, source: nvme.parse_connect(text, "", 0, source)),
    (re.compile(r"list[-_]v|list[-_]verbose"), nvme.parse_list_verbose),
    (re.compile(r"list"), nvme.parse_list),
    (re.compile(r"discover"), nvme.parse_discover),
    (re.compile(r"smart"), nvme.parse_smart_log),
]


def lab_captures() -> list[Path]:
    if not LAB.is_dir():
        return []
    return sorted(p for p in LAB.rglob("*") if p.is_file() and "nvme" in p.name
                  and p.suffix not in (".md", ".cmd", ".sh"))


@pytest.mark.parametrize("path", lab_captures(), ids=lambda p: p.name)
def test_lab_fixture(path):
    """Every nvme-cli capture from the lab guests parses (parametrized over what is there)."""
    parser = next((parse for pattern, parse in PARSER_BY_NAME if pattern.search(path.name)), None)
    text = path.read_text(errors="replace")
    if parser is None:
        pytest.skip(f"{path.name}: not a JSON nvme-cli capture this test knows")
    result = parser(text, path.name)
    assert result is not None


def lab_file(name: str) -> str:
    path = LAB / name
    if not path.is_file():
        pytest.skip(f"lab capture {name} not present")
    return path.read_text()


def test_lab_array_has_24_drives_with_serials():
    namespaces = nvme.parse_list(lab_file("array-nvme-list.json"), "array-nvme-list.json")
    assert len(namespaces) == 24
    assert len({n.serial for n in namespaces}) == 24 and all(n.model == "QEMU NVMe Ctrl" for n in namespaces)
    smart = nvme.parse_smart_log(lab_file("array-nvme-smart-log.json"), "array-nvme-smart-log.json")
    assert smart.temperature_k > 0 and smart.temperature_c == pytest.approx(smart.temperature_k - 273.15)


def test_lab_host_sees_one_subsystem_with_two_live_tcp_paths():
    (verbose,) = nvme.parse_list_verbose(lab_file("nvme-list-v.json"), "nvme-list-v.json")
    assert verbose.nqn.startswith("nqn.") and len(verbose.controllers) == 2
    assert {c.transport for c in verbose.controllers} == {"tcp"}
    assert len({c.address_fields["traddr"] for c in verbose.controllers}) == 2
    assert nvme.parse_smart_log(lab_file("nvme-smart-log-fabrics.json")).temperature_c is None


def test_lab_discover_and_connect():
    log = nvme.parse_discover(lab_file("nvme-discover-rdma.json"), "nvme-discover-rdma.json")
    assert log.subsystems() and all(r.trtype == "rdma" for r in log.records)
    assert nvme.parse_connect(lab_file("nvme-connect-tcp-json.txt"), "", 0).device.startswith("nvme")
    assert nvme.parse_disconnect(lab_file("nvme-disconnect.txt")) == 2
