"""Commands a person can read: ``host: command`` with the ssh wrapper folded away, repeated probes collapsed.

``commands.jsonl`` keeps every subprocess whole (argv, host, times, exit code); a report shows each as the
command that ran on its host (``host1: cat /sys/class/block/nvme0n1/size``), and a run of commands that
differ in one word only (``test -e /sys/class/block/nvme0n1/<attr>/partition`` for 32 attributes) as one line
with the count and the varying word summarized (``{alignment_offset,bdi,capability,...}``).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

SHOWN_VALUES = 3          # varying words shown in a collapsed line before "..."
MIN_VARYING = 3           # commands that differ in one word collapse from this many on


@dataclass(frozen=True)
class Command:
    """One subprocess as it ran on its host."""

    host: str             # "local" or the node name ("host1", "array")
    text: str             # the command on that host (for ssh: what followed "--")
    full: str             # the whole argv, shell-quoted, as commands.jsonl has it
    name: str = ""        # the record's name
    exit_code: int | None = None
    stdout: str = ""      # its output files under raw/ (as commands.jsonl names them)
    stderr: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        try:
            return tuple(shlex.split(self.text))
        except ValueError:
            return (self.text,)


@dataclass(frozen=True)
class CommandGroup:
    """Consecutive commands on one host that differ in at most one word."""

    members: tuple[Command, ...]
    text: str             # the one line: the command, the varying word summarized

    @property
    def host(self) -> str:
        return self.members[0].host

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def failed(self) -> int:
        return sum(1 for m in self.members if m.exit_code not in (0, None))

    def line(self, width: int | None = None) -> str:
        """``host: command  (x32)``; a multi-line script shows its first line; cut at ``width`` with "...". """
        text = " ".join(self.text.split("\n", 1)[0].split()) + (" ..." if "\n" in self.text.strip() else "")
        tail = (f"  (x{self.count})" if self.count > 1 else "") + (f"  [exit != 0: {self.failed}]" if self.failed else "")
        head = f"{self.host}: "
        if width is not None and len(head) + len(text) + len(tail) > width:
            text = text[:max(10, width - len(head) - len(tail) - 4)] + " ..."
        return head + text + tail


def _host_label(host) -> str:
    if isinstance(host, dict):
        return str(host.get("name") or host.get("address") or "?")
    return str(host) if host else "local"


def fold(record: dict) -> Command | None:
    """A commands.jsonl record as ``host: command``; None for a record without an argv list."""
    argv = record.get("argv")
    if not isinstance(argv, list) or not argv:
        return None
    argv = [str(a) for a in argv]
    full = shlex.join(argv)
    host = _host_label(record.get("host"))
    text = full
    if os.path.basename(argv[0]) == "ssh" and "--" in argv:
        cut = argv.index("--")
        remote = argv[cut + 1:]
        text = remote[0] if len(remote) == 1 else shlex.join(remote)
        if host == "local" and cut > 0:
            host = argv[cut - 1].rsplit("@", 1)[-1]
    code = record.get("exit_code")
    return Command(host, text, full, str(record.get("name", "")), code if isinstance(code, int) else None,
                   str(record.get("stdout") or ""), str(record.get("stderr") or ""))


def _alike(x: str, y: str) -> bool:
    """Two values of one varying word share at least half the shorter one (prefix + suffix): ``/dev/nvme1``
    and ``/dev/nvme10`` are alike, ``/sys/.../size`` and ``/proc/self/mountinfo`` are not."""
    prefix = len(os.path.commonprefix([x, y]))
    suffix = len(os.path.commonprefix([x[prefix:][::-1], y[prefix:][::-1]]))
    return 2 * (prefix + suffix) >= min(len(x), len(y))


def _varying(a: tuple[str, ...], b: tuple[str, ...]) -> set[int]:
    """Positions where two commands' words differ; {-1} when they cannot be one group."""
    if len(a) != len(b):
        return {-1}
    diff = {i for i, (x, y) in enumerate(zip(a, b)) if x != y}
    return diff if len(diff) <= 1 and all(_alike(a[i], b[i]) for i in diff) else {-1}


def _summary(values: list[str]) -> str:
    """``/dev/nvme{0,1,10,...}`` for the varying word of a group: common prefix and suffix kept."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return distinct[0]
    prefix = os.path.commonprefix(distinct)
    suffix = os.path.commonprefix([v[len(prefix):][::-1] for v in distinct])[::-1]
    middles = [v[len(prefix):len(v) - len(suffix)] for v in distinct]
    shown = ",".join(middles[:SHOWN_VALUES]) + (",..." if len(middles) > SHOWN_VALUES else "")
    return f"{prefix}{{{shown}}}{suffix}"


def _groups(members: list[Command], position: int | None) -> list[CommandGroup]:
    """One group; two commands that differ stay two lines (``--re-add`` then ``--add`` are two acts)."""
    if position is None or len(members) == 1:
        return [CommandGroup(tuple(members), members[0].text)]
    if len(members) < MIN_VARYING:
        return [CommandGroup((m,), m.text) for m in members]
    words = list(members[0].words)
    words[position] = _summary([m.words[position] for m in members])
    return [CommandGroup(tuple(members), " ".join(words))]


def collapse(commands: list[Command]) -> list[CommandGroup]:
    """Runs of consecutive commands on one host differing in the same one word (or not at all) become one group."""
    groups: list[CommandGroup] = []
    run: list[Command] = []
    position: int | None = None
    for command in commands:
        if run and run[0].host == command.host:
            diff = _varying(run[0].words, command.words)
            if not diff or (-1 not in diff and position in (None, *diff)):
                run.append(command)
                position = next(iter(diff)) if diff else position
                continue
        if run:
            groups += _groups(run, position)
        run, position = [command], None
    if run:
        groups += _groups(run, position)
    return groups


def readable(records) -> list[CommandGroup]:
    """commands.jsonl records -> collapsed groups, in order."""
    return collapse([c for c in (fold(r) for r in records if isinstance(r, dict)) if c is not None])


def wrapped(argv: list[str], width: int = 100) -> str:
    """A command line as a shell takes it, continued with backslashes at ``width`` columns; an option stays
    on one line with its value (``    --evidence /srv/runs/04-soak \\``)."""
    words = [shlex.quote(str(a)) for a in argv]
    groups: list[str] = []
    for word in words:
        if groups and groups[-1].startswith("-") and " " not in groups[-1] and "=" not in groups[-1] \
                and not word.startswith("-"):
            groups[-1] += " " + word
        else:
            groups.append(word)
    lines, line = [], ""
    for group in groups:
        if line and len(line) + 1 + len(group) > width - 2:
            lines.append(line + " \\")
            line = "    " + group
        else:
            line = f"{line} {group}" if line else group
    return "\n".join(lines + [line])
