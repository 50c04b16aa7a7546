"""A rehearsal step whose command wrote its error envelope and then raised keeps that evidence: the rehearsal's
verdict shows the step's own ERROR and its folder, not "no evidence"."""

from fxprobe.core.errors import ToolError
from fxprobe.core.rundir import RunDir
from fxprobe.lab.rehearse import Rehearse


def test_a_step_that_raised_after_recording_its_error_keeps_its_folder(tmp_path):
    rehearse = Rehearse(runner=None, base=tmp_path, progress=lambda text: None, key=None)

    def failing(target):
        with RunDir.start("fault", ["fault", "run", "drive-pull"], path=target).recording():
            raise ToolError("drive slot 0 plugged back, but md did not take it back")

    def silent(target):
        raise ToolError("the guest did not answer")

    kept = rehearse.step("fault drive-pull", "G4", failing)
    lost = rehearse.step("fault link-down", "G4", silent)
    assert kept.run_dir is not None and kept.produced and kept.run_outcome == "error"
    assert "md did not take it back" in kept.error
    assert lost.run_dir is None and not lost.produced
    [first, second] = rehearse.result.verdict().criteria
    assert first.outcome.value == "pass" and "its verdict ERROR" in first.measured
    assert second.outcome.value == "error"
