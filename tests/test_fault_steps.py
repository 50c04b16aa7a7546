"""The fault engine's shape: one path of steps for lab and host, restores dispatched by journal record."""

from __future__ import annotations

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.faults import engine, labprep, methods
from fxprobe.tools import guestview


def method_classes():
    out, pending = [], [methods.Method]
    while pending:
        cls = pending.pop()
        out.append(cls)
        pending += cls.__subclasses__()
    return [c for c in out if c.__dict__.get("via") or c.__dict__.get("record")]


def test_every_method_undoes_its_own_record():
    for cls in method_classes():
        record = cls.record
        assert record, f"{cls.__name__} names no journal record"
        owner = methods.Undo.registry[record]
        assert issubclass(cls, owner), (cls, owner)
        assert owner.undo.__func__ is not methods.Undo.undo.__func__, f"{owner.__name__} has no undo"


def test_the_lab_prepare_records_are_undone_by_their_classes():
    for name in ("lab-paths", "lab-iopolicy", "lab-remove-export"):
        undo = methods.Undo.registry[name]
        assert undo is labprep.LabPrepare and callable(undo.steps[name])    # each step's record has its undo


def test_an_unknown_record_is_refused_by_name():
    with pytest.raises(BadInput, match="unknown method 'teleport'"):
        methods.restore_from_record({"method": "teleport"})


def test_execute_is_the_steps_in_order():
    assert engine.STEPS == ("prepare", "start_load", "inject", "restore", "rebuild", "collect")
    for step in engine.STEPS + ("cleanup", "analyse"):
        assert callable(getattr(engine.FaultRun, step))
    assert issubclass(engine.LabSite, engine.Site)


def test_the_guest_views_are_named_not_reached_into():
    argv = labprep.view_loop("host", 10, 0.5)
    assert argv[:2] == ["bash", str(guestview.SCRIPT)] and argv[2:] == ["loop", "10", "0.5", "host"]
    text = "T 1.0\nsubsys nvme-subsys0 nqn.x round-robin\nns nvme-subsys0 nvme0n1\nT 2.0\n"
    [(t, view)] = labprep.parse_view_loop("host", text)
    assert t == 1.0 and view[0]["nqn"] == "nqn.x" and view[0]["namespaces"] == ["nvme0n1"]
