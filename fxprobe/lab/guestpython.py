"""The Python a lab guest runs fxprobe with, and the guest's ``fxprobe`` command.

A guest sees the host's ``/`` over 9p and runs every program under TCG emulation, where a Python start is
costly: a shared-library interpreter (pyenv's ``--enable-shared`` build, say) spends seconds on the dynamic
relocations of ``libpython`` before it runs a line, while Debian's statically linked ``/usr/bin/python3.X``
of the same X.Y starts several times faster there (0.3 s against 2.0 s for ``-S -c pass`` in a lab guest).
So a guest runs the interpreter of the same minor version that Debian ships, when the machine has it, with
``-S`` (no scan of site-packages and its .pth files) and ``PYTHONPATH`` naming the fxprobe checkout and this
interpreter's site-packages: the guest imports exactly the fxprobe and libraries this process does.

``write_launcher`` puts the same command behind the name ``fxprobe`` in the guest's share (``/fxlab/bin``,
first on the guest's ``PATH`` for ssh sessions), so ``fxprobe ...`` typed in a guest, a fleet's remote
command or a test's guest command starts it the same way.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from pathlib import Path

GUEST_BIN = "/fxlab/bin"          # the guest's view of <share>/bin
# pydantic looks for plugins in the entry points of every installed distribution when fxprobe's first schema is
# built; fxprobe uses none, and the scan reads each distribution's files over 9p under TCG
GUEST_ENV = ("PYDANTIC_DISABLE_PLUGINS=__all__",)


@functools.lru_cache(maxsize=1)
def guest_python_path() -> str:
    """The folder holding the fxprobe package, then this interpreter's site-packages folders."""
    import fxprobe
    root = str(Path(fxprobe.__file__).resolve().parent.parent)
    sites = [p for p in sys.path if p and p != root and Path(p).name in ("site-packages", "dist-packages")]
    return ":".join([root, *sites])


@functools.lru_cache(maxsize=1)
def guest_interpreter() -> str:
    """Debian's statically linked python of this interpreter's X.Y if the machine has it, else this one."""
    candidate = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if candidate.is_file() and os.access(candidate, os.X_OK) and not Path(sys.executable).samefile(candidate):
        return str(candidate)
    return sys.executable


def python_argv(module: str, *args: str) -> list[str]:
    """argv that runs a fxprobe module inside a guest (see the module's docstring)."""
    return ["env", f"PYTHONPATH={guest_python_path()}", *GUEST_ENV, guest_interpreter(), "-S", "-m", module, *args]


def write_launcher(share: Path) -> None:
    """``<share>/bin/fxprobe``: the guest's ``fxprobe`` command (``/fxlab/bin`` in the guest)."""
    folder = share / "bin"
    folder.mkdir(mode=0o700, exist_ok=True)
    launcher = folder / "fxprobe"
    command = " ".join(shlex.quote(part) for part in python_argv("fxprobe.cli.main"))
    launcher.write_text(f"#!/bin/sh\n# fxprobe in a lab guest (written by fxprobe lab up)\nexec {command} \"$@\"\n")
    launcher.chmod(0o700)
