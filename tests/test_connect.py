"""connect as nvme-cli users type it (issue 16, Build 5 without the lab): per-path -f/--host-iface and
-w/--host-traddr paired with the -a addresses in order, DH-CHAP keys that never reach a record or an error line,
digests, queue counts and sizes, nvme-cli's short flags."""

from __future__ import annotations

import pytest

from fxprobe.cli import conventions
from fxprobe.cli.main import cli, main
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.host.fabrics import path_specs
from fxprobe.tools import nvme

SECRET = "DHHC-1:00:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmVLQmuh:"


def parse(argv: list[str]):
    ctx = cli.make_context("fxprobe", list(argv))
    name, command, rest = ctx.command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
    return command.make_context(name, rest, parent=ctx)


def test_connect_speaks_nvme_cli_and_never_records_a_secret(tmp_path, capsys):
    argv = nvme.connect_argv(transport="tcp", traddr="10.1.0.1", nqn="nqn.x", host_iface="eth1", queue_size=256,
                             nr_io_queues=4, hdr_digest=True, data_digest=True, dhchap_secret=SECRET)
    assert argv == ["nvme", "connect", "-t", "tcp", "-a", "10.1.0.1", "-s", "4420", "-n", "nqn.x", "--host-iface",
                    "eth1", "--nr-io-queues", "4", "--queue-size", "256", "--dhchap-secret", SECRET, "--hdr-digest",
                    "--data-digest"]
    run = RunDir.create(tmp_path, "connect")
    nvme.run_connect(Runner(run, dry_run=True), transport="tcp", traddr="10.1.0.1", nqn="nqn.x",
                     dhchap_secret=SECRET, dhchap_ctrl_secret=SECRET.replace("00", "01", 1))
    recorded = (run.path / "commands.jsonl").read_text()
    assert "<secret>" in recorded and "c2VjcmV0" not in recorded
    ctx = parse(["connect", "-a", "10.1.0.1", "-a", "10.2.0.1", "-f", "eth1", "-f", "eth2", "-w", "10.1.0.2",
                 "-i", "8", "-Q", "256", "-l", "10m", "-c", "5s", "-k", "1m", "-g", "-G", "-S", SECRET, "-q", "nqn.h"])
    assert (ctx.params["host_ifaces"], ctx.params["ctrl_loss_tmo"], ctx.params["keep_alive_tmo"]) == \
        (("eth1", "eth2"), 600, 60)
    code = main(["--run-dir", str(tmp_path / "c"), "connect", "-a", "127.0.0.1", "-S", SECRET])
    err = capsys.readouterr().err
    assert code in (3, 4) and SECRET not in err       # no fabrics host here (3), or nothing listens (4)
    envelope = (tmp_path / "c" / "results.json").read_text()
    assert "<secret>" in envelope and "c2VjcmV0" not in envelope


@pytest.mark.parametrize("args, words", [
    (["-a", "10.1.0.1", "-a", "10.2.0.1", "-f", "a", "-f", "b", "-f", "c"], "3 -f/--host-iface for 2 -a/--traddr"),
    (["-t", "rdma", "-a", "10.1.0.1", "-f", "eth1"], "--host-iface binds NVMe/TCP paths"),
    (["-a", "10.1.0.1", "-f", "eth 1"], "not a network interface name"),
    (["-a", "10.1.0.1", "-S", "hunter2"], "--dhchap-secret: not a DH-CHAP key"),
])
def test_connect_refusals_are_one_line(tmp_path, capsys, args, words):
    code = main(["--runs", str(tmp_path), "connect", *args])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and "hunter2" not in err, err


def test_paths_pair_with_their_interfaces_in_order():
    specs = path_specs(["10.1.0.1", "10.2.0.1"], "4420", ["eth1", "eth2"], ["10.1.0.2"])
    assert [(s.traddr, s.host_iface, s.host_traddr) for s in specs] == [("10.1.0.1", "eth1", "10.1.0.2"),
                                                                         ("10.2.0.1", "eth2", "10.1.0.2")]
    assert conventions.redact_argv(["connect", "-S", SECRET, f"--dhchap-ctrl-secret={SECRET}", "-a", "x"]) == \
        ["connect", "-S", "<secret>", "--dhchap-ctrl-secret=<secret>", "-a", "x"]
