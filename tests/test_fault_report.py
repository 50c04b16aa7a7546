"""Advice, guest views, event lines, timeline changes and the PNG, without a lab."""

import json

import pandas as pd

from fxprobe.faults import advice, labprep, plot, timeline
from fxprobe.faults.engine import drive_gone_instant, load_argv
from fxprobe.faults.scenario import parse_scenario
from fxprobe.tools.fio import parse_fio_hist_log

DEFAULTS = {"controllers": {"nvme0": {"kato": "5", "ctrl_loss_tmo": "600", "reconnect_delay": "10",
                                      "fast_io_fail_tmo": "off", "state": "live"},
                            "nvme1": {"kato": "5", "ctrl_loss_tmo": "600", "reconnect_delay": "10",
                                      "fast_io_fail_tmo": "off", "state": "live"}},
            "iopolicy": "numa"}


def test_advice_two_paths_defaults_names_timeouts_beside_the_stall():
    result = advice.advise(DEFAULTS, 15.0, 2)
    text = "\n".join(result.lines)
    assert "nvme0: kato 5 s, ctrl_loss_tmo 600 s, reconnect_delay 10 s, fast_io_fail_tmo off" in text
    assert "stall 15 s with 2 paths" in text and "kato 5 s" in text
    assert result.try_next == {"keep_alive_tmo": 2, "iopolicy": "round-robin", "reconnect_delay": 1}


def test_advice_when_already_tuned_points_past_kato():
    tuned = {"controllers": {"nvme0": {"kato": "2", "reconnect_delay": "1", "fast_io_fail_tmo": "5"}},
             "iopolicy": "round-robin"}
    result = advice.advise(tuned, 7.5, 2)
    assert result.try_next == {"keep_alive_tmo": 1}
    assert any("longer than 2 x kato" in line for line in result.lines)


def test_advice_single_path_says_add_a_path_and_bound_the_hang():
    one = {"controllers": {"nvme0": DEFAULTS["controllers"]["nvme0"]}, "iopolicy": "numa"}
    result = advice.advise(one, 20.0, 1)
    assert result.try_next == {"paths": 2, "fast_io_fail_tmo": 5}
    assert any("single path" in line for line in result.lines)


HOST_VIEW = """subsys nvme-subsys0 nqn.2026-12.io.fxprobe:t:array round-robin
ns nvme-subsys0 nvme0n1
path nvme-subsys0 nvme0 live tcp traddr=10.1.1.1,trsvcid=4420,src_addr=10.1.1.2
path nvme-subsys0 nvme1 connecting tcp traddr=10.2.1.1,trsvcid=4420,src_addr=10.2.1.2
"""
ARRAY_VIEW = """Personalities : [raid6] [raid5] [raid4] [raid0]
md127 : active raid6 nvme5n1[5] nvme4n1[4] nvme3n1[3] nvme2n1[2] nvme1n1[1]
      253952 blocks super 1.2 level 6, 512k chunk, algorithm 2 [6/5] [_UUUUU]

unused devices: <none>
--fxprobe--
ctrl nvme1 FXL409753S01 nvme1n1
ctrl nvme8 FXL409753S06 nvme6n2
ctrl nvme9 FXL409753S07
"""


def test_guest_views_parse_like_guestinfo():
    subsystems = labprep.parse_host_view(HOST_VIEW)
    assert subsystems == [{"name": "nvme-subsys0", "nqn": "nqn.2026-12.io.fxprobe:t:array",
                           "iopolicy": "round-robin", "namespaces": ["nvme0n1"],
                           "paths": [{"controller": "nvme0", "state": "live", "transport": "tcp",
                                      "address": "traddr=10.1.1.1,trsvcid=4420,src_addr=10.1.1.2"},
                                     {"controller": "nvme1", "state": "connecting", "transport": "tcp",
                                      "address": "traddr=10.2.1.1,trsvcid=4420,src_addr=10.2.1.2"}]}]
    array = labprep.parse_array_view(ARRAY_VIEW)
    assert array["md"][0]["health"] == "_UUUUU" and array["md"][0]["degraded"]
    assert array["nvme_controllers"][1] == {"name": "nvme8", "serial": "FXL409753S06", "transport": "pcie",
                                            "namespaces": ["nvme6n2"]}
    assert array["nvme_controllers"][2]["namespaces"] == []
    assert timeline.md_text(array["md"][0]) == "raid6 [6/5] [_UUUUU]"


def test_event_lines_are_shifted_to_the_local_clock_and_junk_is_skipped():
    text = "\n".join([json.dumps({"t": 100.5, "source": "uevent", "action": "remove", "subsystem": "block",
                                  "device": "nvme0n1"}), "Warning: something", "{bad json", json.dumps({"x": 1})])
    events = timeline.parse_event_lines(text, offset_s=-0.5)
    assert events == [{"t": 101.0, "source": "uevent", "action": "remove", "subsystem": "block", "device": "nvme0n1"}]
    node = [{"t": 101.0, "node": "array", **events[0]}]
    assert drive_gone_instant(node, 100.0, 103.0) == 101.0
    assert drive_gone_instant([], 100.0, 103.0) == 103.0


def test_changes_keep_only_state_transitions():
    samples = [timeline.Sample(1, {"nvme0": "live"}, {}), timeline.Sample(2, {"nvme0": "live"}, {}),
               timeline.Sample(3, {"nvme0": "resetting"}, {}), timeline.Sample(4, {}, {}, error="ssh timed out"),
               timeline.Sample(5, {"nvme0": "live"}, {})]
    assert [c["t"] for c in timeline.changes(samples)] == [1, 3, 5]


def test_load_argv_writes_epoch_logs_and_counts_errors():
    scenario = parse_scenario('[fault]\nkind = "drive-pull"\nslot = 1\n[load]\nlog_msec = 1000\n[timing]\n[criteria]\n',
                              "x.toml")
    argv = load_argv(scenario, "/dev/nvme0n1", "/tmp/d")
    for flag in ("--log_unix_epoch=1", "--log_avg_msec=0", "--log_hist_msec=1000", "--continue_on_error=all",
                 "--write_lat_log=/tmp/d/load", "--output-format=json"):   # per-I/O completion log: exact stalls
        assert flag in argv
    assert "--runtime=322" in argv       # 10 + 10 + the rebuild bound (300 s after the restore) + 2
    quick = parse_scenario('[fault]\nkind = "drive-pull"\nslot = 1\n[timing]\nrebuild_s = 0\n[criteria]\n', "x.toml")
    assert "--runtime=32" in load_argv(quick, "/dev/nvme0n1", "/tmp/d")
    assert not any(a.startswith("--rate_iops") for a in argv)               # as fast as the target answers
    paced = parse_scenario('[fault]\nkind = "drive-pull"\nslot = 1\n[load]\nrate_iops = 40\n[timing]\n[criteria]\n',
                           "x.toml")
    assert "--rate_iops=40" in load_argv(paced, "/dev/nvme0n1", "/tmp/d")


def test_png_shows_load_fault_and_restore(tmp_path):
    t0 = 1_796_232_000_000
    iops = pd.Series({t0 + i * 500: (0.0 if 20 <= i < 26 else 100.0) for i in range(1, 40)})
    hist = parse_fio_hist_log("".join(f"{t0 + i * 500}, 0, 4096, " + ", ".join(["1"] + ["0"] * 1855) + "\n"
                                      for i in range(1, 40)))
    path = plot.plot_timeline(tmp_path / "t.png", title="test", iops=iops, hist=hist, start_ms=t0,
                              inject_ms=t0 + 10_000, restore_ms=t0 + 14_000, flaps=[(t0 + 11_000, False)],
                              samples=[{"t": (t0 + 9000) / 1000, "paths": {"a": "live"}, "md": {}}],
                              events=[{"t": (t0 + 10_100) / 1000, "source": "uevent"}], stall=(3.0, t0 + 10_000))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_sampling_loop_output_becomes_local_samples():
    argv = labprep.view_loop("array", 30, 1)
    assert argv[0] == "bash" and argv[1].endswith("guestview.sh") and argv[2:] == ["loop", "30", "1", "array"]
    host_text = f"T 1000.0\n{HOST_VIEW}T 1001.0\n{HOST_VIEW.replace('connecting', 'live')}T 1002.0\nsubsys nvme-su"
    array_text = f"T 999.5\n{ARRAY_VIEW}T 1000.8\n{ARRAY_VIEW.replace('[6/5] [_UUUUU]', '[6/6] [UUUUUU]')}T 1002"
    host = labprep.parse_sampling(host_text, labprep.parse_host_view)
    array = labprep.parse_sampling(array_text, labprep.parse_array_view)
    assert [t for t, _ in host] == [1000.0, 1001.0]            # the cut-off last block is dropped
    samples = timeline.merge_node_samples(host, array, "nqn.2026-12.io.fxprobe:t:array", host_offset=-0.5,
                                          array_offset=0.0)
    assert [s.t for s in samples] == [1000.5, 1000.8, 1001.5]     # from the host's first block on, both loops'
    assert samples[0].paths == {"nvme0": "live", "nvme1": "connecting"}
    assert samples[0].md == {"md127": "raid6 [6/5] [_UUUUU]"}
    assert samples[1].md == {"md127": "raid6 [6/6] [UUUUUU]"} and samples[1].paths == samples[0].paths
    assert samples[2].md == samples[1].md and samples[2].paths["nvme1"] == "live"


def test_md_clean_after_the_host_s_last_block_is_a_sample_of_its_own():
    """A bench run (drive-pull-two, 06205fd): the array printed [20/20] at 799.05 (local), the host's last complete
    block was 798.93 - merged onto host blocks only, md was never clean before the load stopped at 800.68, and the
    rebuild said 'not finished' although the run had stopped the load because md was clean."""
    host_text = f"T 798.817\n{HOST_VIEW}T 800.033\nsubsys nvme-su"
    array_text = (f"T 797.0\n{ARRAY_VIEW}T 798.444\n{ARRAY_VIEW.replace('[6/5] [_UUUUU]', '[6/6] [UUUUUU]')}"
                  f"T 799.618\n")
    host = labprep.parse_sampling(host_text, labprep.parse_host_view)
    array = labprep.parse_sampling(array_text, labprep.parse_array_view)
    samples = timeline.merge_node_samples(host, array, "nqn.2026-12.io.fxprobe:t:array", host_offset=-0.113,
                                          array_offset=-0.609)
    assert [round(s.t, 3) for s in samples] == [798.93, 799.053]
    assert samples[-1].md == {"md127": "raid6 [6/6] [UUUUUU]"} and samples[-1].paths == samples[0].paths
    from fxprobe.faults import rebuild
    seen = rebuild.observe([{"t_ms": round(s.t * 1000), "md": s.md} for s in samples], inject_ms=790_000,
                           restore_ms=795_000, load_end_ms=800_677, bound_s=300, measure=lambda a, b: (1,) * 7)
    assert seen.finished and seen.restore_to_clean_s == 4.053 and seen.rebuild_s == 0.0, seen
