"""``fxprobe selftest``: G1, every drive of the array recognized, live and healthy."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.host import selftest as selftest_lib
from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.options import NON_NEGATIVE_INT, POSITIVE_INT, number


@click.command()
@click.option("--expect-drives", type=POSITIVE_INT, default=24, show_default=True, help="How many drives the array must show.")
@click.option("--subsystem", default=None, metavar="NQN", help="Only the drives behind this subsystem.")
@click.option("--serials", "serials_file", type=click.Path(path_type=Path), default=None,
              help="Expected serials: one per line, 'SERIAL' or 'SLOT SERIAL'; '#' comments.")
@click.option("--max-media-errors", type=NON_NEGATIVE_INT, default=0, show_default=True)
@click.option("--min-spare", type=number(int, ge=0, le=100, name="percent 0-100"), default=10, show_default=True, help="Minimum available spare, percent.")
@click.option("--max-percent-used", type=number(int, ge=0, le=255, name="percent 0-255"), default=90, show_default=True, help="Maximum wear (percentage used).")
@click.option("--allow-mixed-firmware", is_flag=True, help="List firmware differences without failing.")
@pass_app
def selftest(app: App, expect_drives, subsystem, serials_file, max_media_errors, min_spare, max_percent_used,
             allow_mixed_firmware) -> int:
    """Recognize every NVMe drive of one array: count, live state, SMART health, firmware agreement."""
    limits = selftest_lib.Limits(expect_drives, max_media_errors, min_spare, max_percent_used, allow_mixed_firmware)
    expected = selftest_lib.load_expected_serials(serials_file) if serials_file else None
    run = app.new_run("selftest")
    drives, verdict, disagreements = selftest_lib.run_selftest(app.runner(run), limits, subsystem, expected)
    extra = {"drives_recognized": len(drives), "expect_drives": expect_drives,
             "limits": limits.__dict__, "drives": [d.to_dict() for d in drives],
             "disagreements": disagreements}
    human = [f"{len(drives)} NVMe drive(s): " + ", ".join(d.serial for d in drives)] + \
            [f"DISAGREE {d}" for d in disagreements]
    return finish_verdict(app, run, "selftest", verdict, extra, human)
