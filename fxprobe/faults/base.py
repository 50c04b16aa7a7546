"""What every fault method is: its environment (``Env``), the ``Method`` interface, and ``Undo`` - the class
that wrote a journal record undoes it (``Undo.registry``, by the record's ``method`` name), in this run or
in a new process, with a ``RestoreContext``. The methods themselves are in :mod:`fxprobe.faults.methods`
(and the target-control one in :mod:`fxprobe.faults.control`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from fxprobe.core.errors import BadInput
from fxprobe.core.runner import Runner


@dataclass
class Env:
    """Where faults happen: ``lab`` (fxprobe.lab.vm.Lab) or None for this Linux host."""

    runner: Runner
    lab: object | None = None
    load_host: str = "host1"
    nqn: str | None = None                 # subsystem the load uses (lab)
    export: str = "main"                   # lab export the load uses: main or twin
    export_level: str | None = None        # RAID level of an export the run builds (the twin), known before
    say: Callable[[str], None] = print     # manual method: tell the engineer
    events: list = field(default_factory=list)   # (epoch s, text) of what was done

    def note(self, text: str) -> float:
        now = time.time()
        self.events.append((now, text))
        return now


class Undo:
    """Undoes one kind of journal record (its ``method`` field is ``record``); every subclass that names a
    ``record`` is registered, so a record is replayed by the class that wrote it, also in a new process."""

    record = ""
    registry: dict[str, type["Undo"]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("record"):
            for name in (cls.__dict__["record"], *cls.__dict__.get("also", ())):
                Undo.registry[name] = cls

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        """Undo ``record``; returns what was done. Safe to call when it is already undone."""
        raise NotImplementedError


class Method(Undo):
    kind = ""
    via = ""

    def __init__(self, env: Env, fault: dict):
        self.env = env
        self.fault = fault
        self.observed: list[str] = []      # what the method itself saw the fault do (faults.seen takes it)

    @property
    def target(self) -> str:
        """What is broken, as the identity the allow-list names."""
        raise NotImplementedError

    def plan(self) -> list[str]:
        raise NotImplementedError

    def probe(self) -> str | None:
        return None

    def refusals(self) -> list[str]:
        """Why this fault would be visible or lose data (only path, RAID redundancy): --allow-visible plants it."""
        return []

    def unsafe(self) -> list[str]:
        """Why this fault would touch something in use (mounted, root, swap, held): never allowed, whatever the
        options; each line is also among ``refusals``."""
        return []

    def restore_record(self) -> dict:
        raise NotImplementedError

    def inject(self) -> None:
        raise NotImplementedError

    def load_nics(self, live_paths: list[dict]) -> set[str]:
        """The interfaces this fault cuts that carry one of ``live_paths`` (the load's, before the fault): a
        netlink DOWN of one of them shows a link fault happened (faults.seen); none by default."""
        return set()


def _need(fault: dict, key: str, what: str) -> object:
    if fault.get(key) is None:
        raise BadInput(f"fault.{key} is required for {what}")
    return fault[key]


@dataclass
class RestoreContext:
    """What an undo needs: the run's environment when there is one (its lab, its ``say``), else a runner."""

    env: Env | None = None
    runner: Runner | None = None

    def __post_init__(self):
        self.runner = self.runner or (self.env.runner if self.env else Runner())

    def say(self, text: str) -> None:
        (self.env.say if self.env else print)(text)

    def lab(self, name: str):
        """The run's own lab object when it is this lab (its state in memory), else the lab loaded by name."""
        if self.env is not None and self.env.lab is not None and self.env.lab.name == name:
            return self.env.lab
        from fxprobe.lab.vm import Lab
        return Lab.load(name, self.runner)
