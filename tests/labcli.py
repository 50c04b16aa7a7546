"""Run fxprobe inside a lab guest, as a user would with `fxprobe lab exec GUEST -- fxprobe ...`."""

from __future__ import annotations

import json


def fx(lab, guest: str, *args: str, timeout: float = 300, input: str | None = None):
    """(exit code, parsed --json result or None, stderr) of `fxprobe --json ARGS` in GUEST."""
    result = lab.exec(guest, lab.python("fxprobe.cli.main", "--runs", "/tmp/fxprobe-runs", "--json", *args),
                      timeout=timeout, input=input, label="fxprobe-" + args[0])
    out = result.stdout.strip()
    data = json.loads(out) if out.startswith("{") else None
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, data, result.stderr


def criteria(data: dict) -> dict:
    return {c["name"]: c for c in data["verdict"]["criteria"]}


def fx_here(tmp_path, *args: str) -> tuple[int, dict | None, str]:
    """(exit code, parsed --json result or None, stderr) of `fxprobe --json ARGS` run in this process."""
    import contextlib
    import io
    from fxprobe.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--runs", str(tmp_path / "runs"), "--json", *args])
    text = out.getvalue().strip()
    return code, json.loads(text) if text.startswith("{") else None, err.getvalue()


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(v)


def write_scenario(path, data: dict):
    """A scenario file from ``data`` (top-level keys, then one table per dict); returns ``path``."""
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, table in data.items():
        if isinstance(table, dict):
            lines += [f"[{section}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def shipped(name: str, **sections: dict) -> dict:
    """A shipped scenario (faults/NAME.toml) with some of its tables' keys replaced."""
    import tomllib
    from fxprobe.faults.scenario import SCENARIO_DIR
    data = tomllib.loads((SCENARIO_DIR / f"{name}.toml").read_text())
    for section, table in sections.items():
        data.setdefault(section, {}).update(table)
    return data


# The load of the fault runs that judge no time (scripts/test's part 2, two labs on two cores): 40 I/O per second
# instead of as fast as the lab answers. A lab's CPU goes with its I/O (host1 and the array guest together: 0.61 of
# a core at 411 IOPS flat out, 0.57 at 200, 0.22 at 20, measured on a lab alone), and what these tests check (the
# verdict either way, errors, the restore, the advice) does not depend on the pace; the CPU goes to the lab beside.
PARALLEL_LOAD = {"region": "2M", "rate_iops": 40}


def scenario_file(tmp_path, name: str, **sections: dict):
    """tmp_path/NAME.toml: the shipped scenario NAME with ``sections`` merged in (e.g. timing={...})."""
    return write_scenario(tmp_path / f"{name}.toml", shipped(name, **sections))


def fxprobe_argv(tmp_path, *args: str) -> list[str]:
    """argv of `fxprobe --runs TMP/runs --json ARGS` in a process of its own (as a user runs it)."""
    import sys
    return [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "--json", *args]


def fault_env(tmp_path) -> dict:
    """The environment with a restore journal of the test's own."""
    import os
    return {**os.environ, "FXPROBE_FAULT_JOURNAL": str(tmp_path / "fault-journal.json")}


def fault_run(lab, tmp_path, scenario, *extra: str, timeout: float = 600):
    """`fxprobe fault run SCENARIO --lab LAB EXTRA` in its own process; the lab's state is read again after it
    (the run changed it from another process) and no traceback may appear."""
    import subprocess
    done = subprocess.run(fxprobe_argv(tmp_path, "fault", "run", str(scenario), "--lab", lab.name, *extra),
                          capture_output=True, text=True, timeout=timeout, env=fault_env(tmp_path))
    lab.reload()
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done


def raw_completions(run_dir) -> list[int]:
    """Every successful completion instant (epoch ms) in a fault run's raw per-I/O logs, read here by hand."""
    times = []
    for path in sorted((run_dir / "raw").glob("*fio-load_clat.*.log")):
        for line in path.read_text().splitlines():
            if line.strip():
                times.append(int(line.split(",")[0]))
    assert times, sorted(p.name for p in (run_dir / "raw").iterdir())
    return sorted(times)


RAID6_FIRST_DATA_ROLE = 1     # md raid6 left-symmetric (mdadm's default): stripe 0 has Q on role 0, P on the last,
                              # data chunk 0 (the export's first bytes) on role 1


def first_data_member(lab) -> tuple[int, str, int, int]:
    """(lab slot, device in the array guest, data offset, chunk bytes) of the main (raid6) export's member that holds
    the export's first bytes: what a load of the first MiBs reads from it, a pull makes degraded."""
    from fxprobe.faults.labprep import array_view, wait_md_idle
    from fxprobe.tools.guestview import md_geometry_argv
    from fxprobe.tools.mdadm import parse_md_geometry
    wait_md_idle(lab, 300)        # an earlier test's replaced drive may still be rebuilding
    name = lab.main_export.backing.rsplit("/", 1)[-1]
    geometry = parse_md_geometry(lab.exec("array", md_geometry_argv(name), timeout=60, check=True).stdout)
    assert geometry.level == "raid6", geometry
    # zeros below md are read back only from a whole array: a degraded one reads through md's stripe cache
    # (chunk-aligned reads bypass it only when no member is missing), which may still hold the old bytes
    [md] = [a for a in array_view(lab)["md"] if a["name"] == name]
    assert not md.get("degraded") and "_" not in (md.get("health") or ""), f"{name} is not whole: {md}"
    [(_, device, offset)] = [m for m in geometry.members if m[0] == RAID6_FIRST_DATA_ROLE]
    serial = next(c["serial"] for c in array_view(lab)["nvme_controllers"] if device in c.get("namespaces", []))
    slot = next(d.slot for d in lab.state.drives if d.serial == serial)
    return slot, device, offset, geometry.chunk_bytes


def _saved(member: str, offset: int) -> str:
    return f"/tmp/fxprobe-below-md-{member}-{offset}.bin"


def zeros_below_md(lab, member: str, offset: int, length: int = 4096) -> None:
    """Zeros over ``length`` bytes at ``offset`` of an md member, below md (direct I/O in the array guest); what was
    there is kept for put_back_below_md."""
    where = [f"bs={length}", "count=1"]
    lab.exec("array", ["dd", f"if=/dev/{member}", f"of={_saved(member, offset)}", *where, f"skip={offset // length}",
                       "iflag=direct"], timeout=60, check=True)
    lab.exec("array", ["dd", "if=/dev/zero", f"of=/dev/{member}", *where, f"seek={offset // length}", "oflag=direct",
                       "conv=notrunc"], timeout=60, check=True)


def put_back_below_md(lab, member: str, offset: int, length: int = 4096) -> None:
    """The bytes zeros_below_md overwrote, written back: the member agrees with md's parity again (a later degraded
    read would otherwise rebuild a neighbour from a parity that no longer matches its data)."""
    lab.exec("array", ["dd", f"if={_saved(member, offset)}", f"of=/dev/{member}", f"bs={length}", "count=1",
                       f"seek={offset // length}", "oflag=direct", "conv=notrunc"], timeout=60, check=True)


def see_current_code(lab, guest: str) -> str:
    """Drop GUEST's page cache if fxprobe's sources changed after the lab was created, so the guest runs the
    current code: it reads this tree over 9p with a loose cache and keeps what it read first. Unchanged sources
    (the suite: the checkout is fixed before its labs boot) keep the guest's warm cache - a dropped cache makes
    the next fxprobe start in the guest read every module again over 9p (~20-30 s at load under TCG)."""
    from datetime import datetime
    from pathlib import Path
    import fxprobe
    created = datetime.fromisoformat(lab.state.created.replace("Z", "+00:00")).timestamp()
    newest = max(p.stat().st_mtime for p in Path(fxprobe.__file__).parent.rglob("*.py"))
    if newest < created:
        return "sources unchanged since the lab was created: cache kept"
    lab.exec(guest, ["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], timeout=60, check=True)
    return "sources changed since the lab was created: page cache dropped"

