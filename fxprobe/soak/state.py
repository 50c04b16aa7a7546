"""``soak-state.json``: what ``--resume`` needs of a soak that stopped - its configuration, the fio it had running
(to stop it: pid, exact argv, start times, job processes), the paths live when it started and how many segments it
ran - as one typed record, read and written here and nowhere else."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import write_json
from fxprobe.core.schema import describe
from fxprobe.soak.common import DEFAULT_HEALTH_S, DEFAULT_SAMPLE_S, DEFAULT_STALL_S


@dataclass(frozen=True)
class SoakConfig:
    profile: str
    target: str
    planned_s: float
    stall_s: float = DEFAULT_STALL_S
    sample_s: float = DEFAULT_SAMPLE_S
    health_s: float = DEFAULT_HEALTH_S
    scale: float = 1.0
    max_bytes: int | None = None
    allow: tuple[str, ...] = ()
    overrides: dict = field(default_factory=dict)
    no_verify_reason: str = ""      # --no-verify: the soak does not verify its data, and says why

    def validate(self) -> "SoakConfig":
        for name in ("stall_s", "sample_s", "health_s"):
            if not getattr(self, name) > 0:
                raise BadInput(f"--{name[:-2]} must be more than 0 seconds (got {getattr(self, name)})")
        return self


class _State(BaseModel):
    """Assignments are checked; keys an older fxprobe wrote and this one does not know are dropped."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)


class FioJob(_State):
    """One of fio's job processes (fio forks each job into a session of its own)."""

    pid: int
    create_time: float | None = None


class FioState(_State):
    """The fio a segment runs: its main process and the exact command line every process of it runs."""

    pid: int | None = None
    argv: list[str] = Field(default_factory=list)
    create_time: float | None = None
    segment: int | None = None
    jobs: list[FioJob] = Field(default_factory=list)
    stderr: str | None = None          # its stderr file in the run's raw/ (the verify failures fio printed)


class SoakState(_State):
    command: Literal["soak"] = "soak"
    version: int = 1
    config: SoakConfig
    segments: int = 0                                  # segments started (fio runs), the last one's number
    baseline_paths: dict[str, dict] = Field(default_factory=dict)   # NVMe paths live at the start, by controller
    fio: FioState = Field(default_factory=FioState)
    fxprobe_pid: int | None = None                     # the fxprobe running the soak (a second one is refused)

    @classmethod
    def read(cls, path: Path) -> "SoakState":
        """The state file; BadInput (one line naming the file and field) when it is not a soak's state."""
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadInput(f"{path}: not a valid soak state ({type(exc).__name__}: {exc})") from None
        except ValidationError as exc:
            raise BadInput(describe(exc, str(path), cls)) from None

    def write(self, path: Path) -> None:
        write_json(path, self.model_dump(mode="json"))
