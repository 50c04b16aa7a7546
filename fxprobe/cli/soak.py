"""``fxprobe soak PROFILE --duration 72h --target DEV|DIR`` and ``fxprobe soak --resume RUNDIR`` (G4)."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe import soak as soak_lib
from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.profile import max_bytes_of, size_option
from fxprobe.cli.run import parse_sets
from fxprobe.core.errors import BadInput
from fxprobe.cli.options import duration
from fxprobe.cli.statusline import metrics_options, metrics_sink, status_for


def _status(app: App, config, metrics):
    """The live line: one plain line per progress interval off a terminal (as the soak printed before)."""
    return status_for(app, "soak", min(60.0, max(1.0, config.planned_s / 100)), metrics)


@click.command()
@click.argument("profile", required=False)
@click.option("--duration", type=duration(gt=0), default=None, help="Load period.")
@click.option("--target", default=None, help="Directory or block device (/dev/...) to load.")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path), default=None,
              help="Continue the soak in RUNDIR after a crash (the gap is recorded as an interruption).")
@click.option("--stall", type=duration(gt=0), default=soak_lib.DEFAULT_STALL_S, show_default=True,
              help="Time without a completed I/O that counts as a stall.")
@click.option("--sample", type=duration(gt=0), default=soak_lib.DEFAULT_SAMPLE_S, show_default=True,
              help="Time between telemetry samples (CPU, memory, disks, NICs, NVMe, md).")
@click.option("--health", type=duration(gt=0), default=soak_lib.DEFAULT_HEALTH_S, show_default=True,
              help="Time between `nvme smart-log` reads.")
@click.option("--allow-serial", "allow", multiple=True,
              help="Serial (or loop:<file>) of a device that may be written (repeatable).")
@click.option("--set", "sets", multiple=True, help="Override a profile key, e.g. --set threads=8 (repeatable).")
@click.option("--no-verify", "no_verify", default=None, metavar="REASON",
              help="Do not check the data the load reads back against its verify headers; REASON is printed and "
                   "recorded, and the soak's data criterion is NOT RUN.")
@size_option
@metrics_options
@pass_app
def soak(app: App, profile, duration, target, resume_dir, stall, sample, health, allow, sets, no_verify, scale,
         max_bytes, metrics_port, metrics_file) -> int:
    """Run PROFILE for the whole --duration; record every interruption (G4 evidence)."""
    metrics = metrics_sink(metrics_port, metrics_file)
    if resume_dir is not None:
        run, state = soak_lib.load_state(resume_dir)
        config = state.config
        given = {"PROFILE": (profile, config.profile), "--target": (target, config.target)}
        for name, (value, recorded) in given.items():
            if value is not None and value != recorded:
                raise BadInput(f"{name} {value!r} differs from the resumed soak's {recorded!r}",
                               hint="leave it out: --resume takes it from the run")
        if no_verify is not None:
            raise BadInput("--no-verify applies to a new soak; --resume verifies as the soak it resumes did")
        if duration is not None and duration != config.planned_s:
            raise BadInput(f"--duration {duration:g} s differs from the resumed soak's {config.planned_s:g} s",
                           hint="leave it out: --resume takes it from the run")
        # before anything slow: the fio of a crashed soak is still loading the target
        orphan = soak_lib.kill_orphan(state.fio)
        app.resume_run(run, "soak")
        summary = soak_lib.Soak(run, app.runner(run), config, app.progress, state,
                                status=_status(app, config, metrics)).resume(orphan)
    else:
        if not profile:
            raise BadInput("give a PROFILE to run (fxprobe profile list), or --resume RUNDIR")
        if duration is None or target is None:
            raise BadInput(f"soak {profile}: --duration and --target are required")
        if no_verify is not None and not no_verify.strip():
            raise BadInput("--no-verify needs a reason: say why this soak does not verify its data")
        config = soak_lib.SoakConfig(profile, target, duration, stall, sample, health,
                                     scale, max_bytes_of(max_bytes), tuple(allow), parse_sets(sets), no_verify or "")
        soak_lib.plan_soak(config)
        _warn_stall_above_g4(stall)
        run = app.new_run("soak")
        summary = soak_lib.Soak(run, app.runner(run), config, app.progress,
                                status=_status(app, config, metrics)).start()
    return finish_verdict(app, run, "soak", summary.verdict(),
                          {**summary.to_dict(), "records": soak_lib.RECORDS}, summary.lines())


def _warn_stall_above_g4(stall_s: float) -> None:
    """Say at the start, not after 72 h, when --stall is longer than G4 accepts (gates.toml g4.soak_stall_max_s, or
    the buyer's default): a shorter stall is not recorded, and G4 fails the soak for it."""
    from fxprobe.gates.config import load_config
    config = load_config(None)
    limit = config.get("g4", "soak_stall_max_s")
    if stall_s > limit:
        click.echo(f"WARNING: --stall {stall_s:g} s is longer than G4 accepts (g4.soak_stall_max_s = {limit:g} s, "
                   f"{config.source}): stalls of {limit:g}-{stall_s:g} s go unrecorded and G4 will FAIL this soak; "
                   f"use --stall {limit:g} or less for acceptance evidence", err=True)
