"""G2's benchmark comparison against the reference table: what it compares, with what, and what it keeps."""

from __future__ import annotations

import json
from pathlib import Path

from gate_helpers import BENCH, fxprobe, r2, results_of, runs_of

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = str(ROOT / "examples" / "claims" / "reference-r2.toml")


def test_copies_of_files_with_one_name_never_overwrite_each_other(tmp_path, capsys):
    """a/x.json (c8), a/03-x.json (c16), b/x.json (c32): the third copy went to raw/measured/03-x.json over the
    second, and the c16 criteria cited a file that held the c32 result."""
    for folder, name, level in (("a", "x.json", 8), ("a", "03-x.json", 16), ("b", "x.json", 32)):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_bytes((BENCH / f"r2-array-c{level}.json").read_bytes())
    args = ["gate", "g2", "--reference", REFERENCE, "--measured", str(tmp_path / "a" / "x.json"),
            str(tmp_path / "a" / "03-x.json"), str(tmp_path / "b" / "x.json")]
    fxprobe(tmp_path, *args)
    (run,) = runs_of(tmp_path, "gate g2")
    table = results_of(run)["baseline_comparison"]
    files = {entry["file"] for entry in table.values()}
    assert len(files) == 3, table
    for metric, entry in table.items():
        level = int(metric.split()[0][1:])
        assert json.loads((run / entry["file"]).read_text())["max_concurrency"] == level, (metric, entry["file"])
    assert sorted(p.name for p in (run / "raw" / "measured").iterdir()) == ["03-2-x.json", "03-x.json", "x.json"]


def test_two_results_at_one_level_are_bad_input_before_anything_is_written(tmp_path, capsys):
    """The second c8 result silently replaced the first in the comparison table (G3 refuses the same)."""
    folder = tmp_path / "twoc8"
    folder.mkdir()
    (folder / "a-run1.json").write_bytes((BENCH / "r2-array-c8.json").read_bytes())
    slow = json.loads((BENCH / "r2-array-c8.json").read_text())
    slow["output_throughput"] = 40.0
    (folder / "b-run2.json").write_text(json.dumps(slow))
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", str(folder)) == 2
    err = capsys.readouterr().err
    assert "gate g2: two measured results at concurrency 8" in err and err.count("\n") == 1 and "Traceback" not in err
    assert runs_of(tmp_path, "gate g2") == []
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", r2("array")[0]) in (0, 1, 3)


def test_the_goodput_beside_a_line_efficiency_verdict_is_printed_so_that_it_decides(tmp_path):
    """FAIL at 82.99996 % printed '- goodput 83 Gb/s' beside it: a number that passes (proof border.py)."""
    from fxprobe.gates.catalog import G2
    from fxprobe.gates.config import GateConfig
    from fxprobe.gates.engine import Evidence
    from gate_helpers import fake_run
    for bps, outcome, shown in ((82.99996e9, "fail", "goodput 82.99996 Gb/s"), (84.12e9, "pass", "goodput 84.12 Gb/s")):
        run = fake_run(tmp_path / shown, "line-efficiency", {
            "transport": "rdma", "label": "RDMA READ (ib_read_bw)", "port_speed_bps": 100e9, "interface": "eth0",
            "summary": {"mean_bps": bps, "line_efficiency": bps / 100e9}})
        criterion = G2.evaluate(Evidence.from_paths([run]), GateConfig()).criteria[0]
        assert criterion.outcome.value == outcome and f"- {shown} against" in criterion.line(), criterion.line()
