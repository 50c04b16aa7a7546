"""``fxprobe selftest``: G1, every drive of the array recognized, live and healthy."""

from __future__ import annotations

import socket
from pathlib import Path

import click

from fxprobe.core import kernel
from fxprobe.core.errors import BadInput
from fxprobe.host import selftest as selftest_lib
from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.fleet import fleet_options, run_fleet, single_node
from fxprobe.cli.options import NON_NEGATIVE_INT, POSITIVE_INT, number


DEFAULT_DRIVES = 24
STDIN = kernel.STDIN     # how a fleet hands each node its list (also where /dev/stdin is missing; '-' works too)


@click.command()
@click.option("--expect-drives", type=POSITIVE_INT, default=None,
              help="How many drives the array must show (default: as many as --expect-from/--serials list, else 24).")
@click.option("--subsystem", default=None, metavar="NQN", help="Only the drives behind this subsystem.")
@click.option("--serials", "serials_file", type=click.Path(path_type=Path), default=None,
              help="Expected serials: one per line, 'SERIAL' or 'SLOT SERIAL'; '#' comments; '-' reads them from stdin.")
@click.option("--expect-from", "expect_from", type=click.Path(path_type=Path), default=None, metavar="RUNDIR",
              help="Expected drives (slot and serial) from an earlier selftest or inventory run folder, "
                   "e.g. the delivery inspection's.")
@click.option("--max-media-errors", type=NON_NEGATIVE_INT, default=0, show_default=True)
@click.option("--min-spare", type=number(int, ge=0, le=100, name="percent 0-100"), default=10, show_default=True, help="Minimum available spare, percent.")
@click.option("--max-percent-used", type=number(int, ge=0, le=255, name="percent 0-255"), default=90, show_default=True, help="Maximum wear (percentage used).")
@click.option("--allow-mixed-firmware", is_flag=True, help="List firmware differences without failing.")
@click.option("--emulated-drives", "emulated_model", default=None, metavar="MODEL",
              help="Drives of this model are emulated (QEMU's: 'QEMU NVMe Ctrl'): their 0 % spare with threshold "
                   "0 % is not judged, and the criterion says so. Without it a drive reporting 0/0 fails.")
@click.option("--include-fabrics", is_flag=True,
              help="Count NVMe-oF (fabrics) controllers too, one drive per serial and subsystem NQN; by default "
                   "only PCIe controllers are drives of this box.")
@fleet_options
@pass_app
@click.pass_context
def selftest(ctx, app: App, expect_drives, subsystem, serials_file, expect_from, max_media_errors, min_spare,
             max_percent_used, allow_mixed_firmware, emulated_model, include_fabrics, nodes, **_fleet) -> int:
    """Recognize every NVMe drive of one array (or of each --nodes array at once): count, live state, SMART
    health, firmware agreement."""
    if serials_file and expect_from:
        raise BadInput("--serials and --expect-from both name the expected drives: give one")
    if not single_node(nodes, **_fleet):
        return run_fleet(app, ctx, "selftest", fleet_expected(serials_file, expect_from),
                         skip=("--serials", "--expect-from"))
    expected = selftest_lib.load_expected_serials(serials_file) if serials_file else \
        selftest_lib.load_expected_run(expect_from) if expect_from else None
    expect_drives = expect_drives or (len(expected) if expected else DEFAULT_DRIVES)
    limits = selftest_lib.Limits(expect_drives, max_media_errors, min_spare, max_percent_used, allow_mixed_firmware,
                                 emulated_model)
    run = app.new_run("selftest")
    result = selftest_lib.run_selftest(app.runner(run), limits, subsystem, expected, include_fabrics)
    extra = {**selftest_lib.results_of(result, limits, expected, str(expect_from or serials_file)),
             "node": socket.gethostname()}
    human = [f"{extra['drives_recognized']} NVMe drive(s) in {len(result.drives)} controller(s): "
             + ", ".join(d.label() for d in result.drives)] + \
            [f"not counted: {line}" for line in result.skipped] + [f"DISAGREE {d}" for d in result.disagreements]
    if extra["sysfs_root"] != "/":
        human.append(f"sysfs root {extra['sysfs_root']} (FXPROBE_SYSROOT): not this machine's kernel view; "
                     "the G1 gate refuses this run")
    return finish_verdict(app, run, "selftest", result.verdict, extra, human)


def fleet_expected(serials_file, expect_from):
    """Per node: the expected drives (its own sub-run of an earlier fleet run, or the one serials file),
    sent as a serials file on stdin so an SSH node needs no copy of it."""
    if serials_file is None and expect_from is None:
        return None
    common = selftest_lib.load_expected_serials(serials_file) if serials_file else None

    def per_node(node: str):
        expected = common or selftest_lib.load_expected_run(expect_from, node=node, fleet=True)
        return ["--serials", STDIN], fleet_expected_text(expected)
    return per_node


def fleet_expected_text(expected) -> str:
    from fxprobe.host.fleet import expected_input
    return expected_input(expected)
