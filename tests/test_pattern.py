"""Pattern capture: /proc/diskstats sampling of a real loop device under fio, blkparse text, compare."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from fxprobe.cli.main import main
from fxprobe.core.errors import ParseError
from fxprobe.workload.pattern import compare, parse_blkparse, parse_diskstats, summarise_diskstats, DiskStat
from fxprobe.workload.profiles import derive, load_profile
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner


def test_parse_this_machines_diskstats():
    stats = parse_diskstats(Path("/proc/diskstats").read_text())
    assert stats and all(s["reads"] >= 0 and s["weighted_ms"] >= 0 for s in stats.values())


def test_short_diskstats_line_is_a_parse_error():
    with pytest.raises(ParseError, match="line 1"):
        parse_diskstats("   7 0 loop0 1 2 3\n")
    with pytest.raises(ParseError, match="not whole numbers"):
        parse_diskstats("7 0 loop0 " + " ".join(["x"] * 11) + "\n")


def stat(reads, sectors, weighted, writes=0, wsectors=0):
    return DiskStat("d", {"reads": reads, "reads_merged": 0, "sectors_read": sectors, "ms_reading": 0,
                          "writes": writes, "writes_merged": 0, "sectors_written": wsectors, "ms_writing": 0,
                          "in_flight": 0, "ms_io": 0, "weighted_ms": weighted})


def test_diskstats_summary_arithmetic():
    samples = [(0.0, stat(0, 0, 0)), (1.0, stat(100, 12800, 4000)), (2.0, stat(200, 25600, 8000, 100, 800))]
    s = summarise_diskstats(samples, "d")
    assert s.reads == 200 and s.writes == 100 and s.mean_read_bytes == 64 * 1024
    assert s.mean_write_bytes == 4096 and s.queue_depth_mean == pytest.approx(4.0)
    assert s.read_fraction == pytest.approx(2 / 3) and s.sequential_fraction is None


# constructed in the format asked of blkparse: -f "%a %d %S %n %T.%9t\n"
BLKPARSE = """D R 0 128 0.000000001
D R 128 128 0.000000002
C R 0 128 0.000000100
D R 4096 128 0.000000200
C R 128 128 0.000000300
C R 4096 128 0.000000400
D W 9000 8 0.000000500
C W 9000 8 0.000000600
Q R 1 1 0.0
"""


def test_blkparse_sizes_mix_sequentiality_and_depth():
    s = parse_blkparse(BLKPARSE, "nvme0n1", 1.0)
    assert (s.reads, s.writes) == (3, 1)
    assert s.size_histogram == {4096: 1, 65536: 3}
    assert s.sequential_fraction == pytest.approx(1 / 4)     # 128 follows 0
    assert s.queue_depth_mean == pytest.approx((1 + 2 + 2 + 1) / 4)
    with pytest.raises(ParseError):
        parse_blkparse("D R x 8 0.1\n", "d", 1.0)


def workload_of(name: str, **overrides) -> dict:
    d = derive(load_profile(name), overrides=overrides)
    return {"profile": name, "derivation": d.to_dict(), "nodes": ["local"]}


def test_compare_says_where_they_differ():
    captured = {"read_fraction": 1.0, "mean_read_bytes": 1280 * 1024, "mean_write_bytes": None,
                "queue_depth_mean": 60.0, "sequential_fraction": 0.9, "max_request_bytes": 1280 * 1024}
    diffs = {d.aspect: d for d in compare(captured, workload_of("qwen25-32b-cold-restore"))}
    assert diffs["read/write mix"].same
    assert diffs["request size"].same and "splits above" in diffs["request size"].detail
    captured["read_fraction"] = 0.2
    diffs = {d.aspect: d for d in compare(captured, workload_of("qwen25-32b-cold-restore"))}
    assert not diffs["read/write mix"].same and diffs["read/write mix"].line().lstrip().startswith("DIFFERS")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("fio"),
                    reason="needs root, losetup and fio")
def test_capture_a_real_loop_device_under_fio_and_compare(tmp_path, capsys):
    runner = Runner(None)
    backing = tmp_path / "b.img"
    backing.write_bytes(b"\0" * (64 << 20))
    attached = runner.run(["losetup", "--find", "--show", "--direct-io=on", str(backing)], timeout=30)
    if not attached.ok:
        pytest.skip(f"losetup: {attached.stderr.strip()}")
    device = attached.stdout.strip()
    try:
        load = runner.start(["fio", "--name=p", f"--filename={device}", "--rw=randread", "--bs=64k",
                             "--direct=1", "--ioengine=libaio", "--iodepth=4", "--time_based", "--runtime=6",
                             "--size=64m"])
        name = Path(device).name
        deadline = time.monotonic() + 20
        first = parse_diskstats(Path("/proc/diskstats").read_text())[name]["reads"]
        while parse_diskstats(Path("/proc/diskstats").read_text())[name]["reads"] < first + 20:
            assert time.monotonic() < deadline, "fio did not start reading"
            time.sleep(0.05)
        try:
            code = main(["--runs", str(tmp_path / "runs"), "--json", "pattern", "capture", "--device", device,
                         "--seconds", "2", "--interval", "0.25", "--method", "diskstats"])
        finally:
            load.stop()
        out = json.loads(capsys.readouterr().out)
        assert code == 0
        p = out["pattern"]
        assert p["method"] == "diskstats" and p["reads"] > 50 and p["read_fraction"] > 0.95
        assert p["mean_read_bytes"] == pytest.approx(65536, rel=0.05)
        assert 0 < p["queue_depth_mean"] <= 4.5, p  # at most iodepth; lower when the CPUs are busy
        # beside a run directory of the small-file profile made to read 64 KiB at depth 4
        run = RunDir.create(tmp_path / "runs", "run")
        wl = workload_of("small-file-dataset", jobs=4, file_size="64K")
        run.write_results({"workload": wl})
        code = main(["--runs", str(tmp_path / "runs"), "pattern", "compare", out["run_dir"], str(run.path)])
        text = capsys.readouterr().out
        assert "same    read/write mix" in text and "same    request size" in text
        assert "sequentiality: captured unknown" in text
    finally:
        runner.run(["losetup", "-d", device], timeout=30)
