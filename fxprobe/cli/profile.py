"""``fxprobe profile list|show|gen``: the shipped workload profiles, their derivation, fio job files."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.workload import profiles as profiles_lib
from fxprobe.cli.app import App, pass_app
from fxprobe.workload.jobfile import Target, job_text
from fxprobe.cli.options import SCALE
from fxprobe.core.paths import output_file


def size_option(function):
    function = click.option("--size", "max_bytes", default=None,
                            help="Cap the working set (e.g. 256M) so a run fits a small target.")(function)
    return click.option("--scale", type=SCALE, default=1.0, show_default=True,
                        help="Shrink the working set by this factor (0 < s <= 1).")(function)


def max_bytes_of(text: str | None) -> int | None:
    return profiles_lib.parse_size(text, source="--size") if text else None


@click.group()
def profile() -> None:
    """Workload profiles (profiles/*.toml): list, show the derivation, write a fio job file."""


@profile.command("list")
@pass_app
def list_profiles(app: App) -> int:
    """The shipped profiles."""
    rows = []
    for name, path in profiles_lib.available().items():
        prof = profiles_lib.load_profile_file(path)
        rows.append({"name": name, "kind": prof.kind, "description": prof.description, "file": str(path)})
    app.emit({"profiles": rows}, [f"{r['name']:34} {r['kind']:17} {r['description']}" for r in rows])
    return 0


@profile.command("show")
@click.argument("name")
@size_option
@pass_app
def show(app: App, name: str, scale: float, max_bytes: str | None) -> int:
    """The derivation of NAME: block size, file size, file count, jobs, iodepth, and why."""
    d = profiles_lib.derive(profiles_lib.load_profile(name), scale=scale, max_bytes=max_bytes_of(max_bytes))
    app.emit(d.to_dict(), list(d.lines))
    return 0


@profile.command("gen")
@click.argument("name")
@click.option("--target", default="/mnt/kvpool", show_default=True,
              help="Directory (or /dev block device) the job file points at.")
@click.option("--layout", is_flag=True, help="Write the (untimed) layout job instead of the measured one.")
@click.option("--out", "output", type=click.Path(path_type=Path), default=None,
              help="Write the job file here instead of stdout.")
@size_option
@pass_app
def gen(app: App, name: str, target: str, layout: bool, output: Path | None, scale: float,
        max_bytes: str | None) -> int:
    """Write a plain fio job file for NAME that a person can run by hand."""
    d = profiles_lib.derive(profiles_lib.load_profile(name), scale=scale, max_bytes=max_bytes_of(max_bytes))
    text = job_text(d, Target(target, target.startswith("/dev/")), mode="layout" if layout else "measure")
    if output is None:
        click.echo(text, nl=False)
    else:
        output_file(output, "--out").write_text(text)
        app.progress(f"wrote {output}")
    return 0
