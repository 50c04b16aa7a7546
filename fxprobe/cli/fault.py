"""``fxprobe fault run|restore|list``: fault injection under load (gate G4)."""

from __future__ import annotations

import dataclasses

import click

from fxprobe.cli.app import App, finish, pass_app
from fxprobe.cli.statusline import metrics_options, metrics_sink, status_for
from fxprobe.faults import engine
from fxprobe.faults.command import run_fault
from fxprobe.faults.journal import Journal
from fxprobe.faults.scenario import SCENARIO_DIR, load_scenario, scenario_names
from fxprobe.core.verdict import Outcome

STATUS_INTERVAL_S = 2.0      # off a terminal: one status line per 2 s of a (1-2 minute) fault run


@click.group()
def fault():
    """Inject a drive or link fault under load and judge whether the workload notices (G4)."""


@fault.command("list")
@pass_app
def list_scenarios(app: App):
    """Scenarios shipped in faults/."""
    rows = []
    for name in scenario_names():
        scenario = load_scenario(name)
        rows.append({"name": name, "kind": scenario.kind, "via": scenario.fault["via"],
                     "description": scenario.description})
    app.emit({"scenarios": rows, "folder": str(SCENARIO_DIR)},
             [f"{r['name']:24} {r['kind']:18} {r['description']}" for r in rows])


@fault.command("run")
@click.argument("scenario")
@click.option("--lab", "lab", is_flag=False, flag_value="default", default=None, metavar="[NAME]",
              help="Aim at this running lab (--lab alone: the lab named 'default'), as --lab NAME elsewhere.")
@click.option("--dry-run/--yes", "dry_run", default=None,
              help="Print what would happen (default off a lab) / really inject on this host.")
@click.option("--allow-serial", "allow", multiple=True, metavar="SERIAL|IFACE",
              help="Identity the fault may touch (a drive's serial, a link's interface); repeat. Needed off a lab.")
@click.option("--allow-visible", is_flag=True,
              help="Allow a fault that must be visible (only path, loss beyond RAID redundancy): a negative test.")
@metrics_options
@pass_app
def run(app: App, scenario, lab, dry_run, allow, allow_visible, metrics_port, metrics_file):
    """Run SCENARIO (a name from faults/ or a .toml path)."""
    loaded = load_scenario(scenario)
    metrics = metrics_sink(metrics_port, metrics_file)
    options = engine.Options(lab=lab, dry_run=bool(dry_run),
                             yes=dry_run is False, allow=tuple(allow), allow_visible=allow_visible,
                             progress=app.progress)
    run_dir = app.new_run("fault run", folder=f"fault-{loaded.name}")
    run_dir.note(dry_run=options.dry_run, plan={"scenario": loaded.name, "kind": loaded.kind})
    runner = app.runner(run_dir)
    plan = engine.build_plan(loaded, runner, options)
    if options.dry_run:
        human = ["DRY RUN (nothing injected; add --yes and --allow-serial to run it):"] + plan.lines
        if (plan.load_check is not None and not plan.load_check.safe) or (plan.refusals and not allow_visible) \
                or plan.unsafe:
            app.emit({"dry_run": True, "plan": plan.to_dict()}, human)
            plan.require_safe_load()     # refused as the real run is: exit 2, after showing why
            plan.require_allowed()
        return finish(app, run_dir, "fault run", {"dry_run": True, "plan": plan.to_dict(),
                                                         "verdict": None}, human, Outcome.NOT_RUN)
    options.status = status_for(app, "fault run", STATUS_INTERVAL_S, metrics)
    try:
        done = run_fault(plan, run_dir, options, app.runs_base)
    finally:
        options.status.close()
    return finish(app, run_dir, "fault run", done.results, done.human, done.outcome, reason=done.reason)


@fault.command("restore")
@pass_app
def restore(app: App):
    """Undo faults left behind by a crashed or killed run (from the restore journal)."""
    journal = Journal.default()
    entries = journal.entries()
    run_dir = app.new_run("fault restore", folder="fault-restore")
    failed: list[str] = []
    done = engine.replay_journal(journal, app.runner(run_dir), app.progress, failed)
    human = [f"restored: {line}" for line in done] or ([] if failed else
                                                       [f"nothing to restore ({journal.path} has no open entry)"])
    human += [f"FAILED: {line}" for line in failed]
    if failed:
        human.append(f"still broken, kept in {journal.path}: fix it by hand or rerun fxprobe fault restore")
    return finish(app, run_dir, "fault restore", {"entries": entries, "restored": done, "failed": failed}, human,
                  Outcome.ERROR if failed else Outcome.PASS,
                  reason=f"{len(failed)} restore(s) failed: {failed[0]}" if failed else "")


@fault.command("tune")
@click.argument("scenario", default="link-down")
@click.option("--lab", "lab", default="default", metavar="NAME", show_default=True, help="The running lab to tune in.")
@click.option("--transport", "transports", multiple=True, type=click.Choice(["tcp", "rdma"]),
              help="Transport to measure (repeat; default: tcp and rdma).")
@click.option("--setting", "settings", multiple=True, metavar="KEY=N,...",
              help="Timeouts to measure, e.g. kato=2,reconnect_delay=1,ctrl_loss_tmo=60,fast_io_fail_tmo=5, or "
                   "'defaults' (repeat; default: as connected, the advised ones, and faster ones).")
@click.option("--repeat", type=click.IntRange(1, 20), default=3, show_default=True, help="Runs per setting.")
@pass_app
def tune(app: App, scenario, lab, transports, settings, repeat):
    """Measure which host timeouts and transport make a link cut (SCENARIO, default link-down) least visible."""
    from fxprobe.core.errors import BadInput
    from fxprobe.faults import tune as tune_lib
    from fxprobe.faults.orphans import stop_orphans
    loaded = load_scenario(scenario)
    if loaded.kind not in engine.LINK_KINDS:
        raise BadInput(f"fault tune {scenario}: a {loaded.kind} scenario; tune needs a link fault ("
                       f"{', '.join(engine.LINK_KINDS)})")
    chosen = [tune_lib.parse_setting(text) for text in settings] or list(tune_lib.SETTINGS)
    run_dir = app.new_run(tune_lib.COMMAND, folder=tune_lib.FOLDER)
    orphaned = stop_orphans(Journal.default(), app.runner(run_dir), app.progress)
    data, trials = tune_lib.run_tune(loaded, lab, run_dir, Journal.default(), tuple(transports) or tune_lib.TRANSPORTS,
                                     chosen, repeat, app.progress)
    human = [f"fault tune {loaded.name} in lab {lab}: {len(trials)} run(s)"] + tune_lib.lines(data)
    if data["stopped"]:
        human.append(f"STOPPED early, a restore failed: {data['stopped']}")
    outcome = Outcome.ERROR if data["stopped"] else Outcome.PASS if data["meets_criteria"] else Outcome.FAIL
    return finish(app, run_dir, tune_lib.COMMAND, {"tune": data, "scenario": loaded.to_dict(), "orphans": orphaned,
                                                   "trials": [dataclasses.asdict(t) for t in trials]}, human, outcome,
                  reason=data["stopped"] or ("" if data["meets_criteria"] else "no setting met the criteria"))
