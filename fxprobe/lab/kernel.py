"""The lab kernel: Debian's ``linux-image-amd64``, resolved, downloaded, unpacked and cached.

Cache layout (``~/.cache/fxprobe/kernel/<version>/``)::

    vmlinuz             the kernel image
    lib/modules/<ver>/  the modules, with depmod already run
    READY               written last: a half-unpacked cache is never used

A second ``lab up`` finds READY and downloads nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.paths import cache_folder
from fxprobe.core.errors import NotRunnable, ToolError
from fxprobe.core.runner import Runner

META_PACKAGE = "linux-image-amd64"


cache_root = cache_folder      # the lab's kernels and initramfs live in fxprobe's cache


@dataclass(frozen=True)
class LabKernel:
    version: str          # e.g. 6.1.0-57-amd64
    package: str          # e.g. linux-image-6.1.0-57-amd64
    root: Path            # the cache folder

    @property
    def vmlinuz(self) -> Path:
        return self.root / "vmlinuz"

    @property
    def modules_base(self) -> Path:
        """The folder holding ``<version>/``: mounted as /lib/modules in the guests."""
        return self.root / "lib" / "modules"

    @property
    def modules(self) -> Path:
        return self.modules_base / self.version

    def to_dict(self) -> dict:
        return {"version": self.version, "package": self.package, "root": str(self.root)}


def parse_image_package(depends_output: str) -> str:
    """The image package named by ``apt-cache depends linux-image-amd64``."""
    for line in depends_output.splitlines():
        match = re.match(r"\s*Depends:\s*(linux-image-\d[\w.+-]*)", line)
        if match:
            return match.group(1)
    raise ToolError(f"`apt-cache depends {META_PACKAGE}` names no linux-image-<version> package",
                    hint="run `apt-get update` and try again")


def version_of(package: str) -> str:
    return package.removeprefix("linux-image-")


def cached_kernels() -> list[LabKernel]:
    base = cache_root() / "kernel"
    found = []
    if base.is_dir():
        for folder in sorted(base.iterdir()):
            if (folder / "READY").exists():
                found.append(LabKernel(folder.name, f"linux-image-{folder.name}", folder))
    return found


def ensure_kernel(runner: Runner, progress=lambda text: None) -> LabKernel:
    """Return the cached lab kernel, fetching it once if needed."""
    resolved = runner.run(["apt-cache", "depends", META_PACKAGE], timeout=60, always=True)
    if not (resolved.ok and "Depends:" in resolved.stdout) and not cached_kernels() and os.geteuid() == 0:
        progress("kernel: apt-cache does not know linux-image-amd64 yet: apt-get update")
        runner.run(["apt-get", "update", "-q"], timeout=600)
        resolved = runner.run(["apt-cache", "depends", META_PACKAGE], timeout=60, always=True)
    if resolved.ok and "Depends:" in resolved.stdout:
        package = parse_image_package(resolved.stdout)
    else:
        cached = cached_kernels()
        if not cached:
            raise NotRunnable(f"cannot resolve the lab kernel: {resolved.failure('apt-cache')}",
                              hint="run `apt-get update` (the lab kernel comes from Debian's linux-image-amd64)")
        progress(f"kernel: apt-cache did not answer; using cached {cached[-1].version}")
        return cached[-1]
    version = version_of(package)
    root = cache_root() / "kernel" / version
    kernel = LabKernel(version, package, root)
    if (root / "READY").exists():
        progress(f"kernel: {version} (cached in {root})")
        return kernel
    with cache_lock("kernel"):         # two `lab up` at once: one fetches, the other waits and finds READY
        if (root / "READY").exists():
            progress(f"kernel: {version} (cached in {root} by another lab up)")
            return kernel
        return _fetch(runner, kernel, progress)


@contextlib.contextmanager
def cache_lock(name: str):
    """An exclusive lock on one part of the lab cache, held across processes (fcntl.flock)."""
    path = cache_root() / f".{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _fetch(runner: Runner, kernel: LabKernel, progress) -> LabKernel:
    version, package, root = kernel.version, kernel.package, kernel.root
    progress(f"kernel: downloading {package}")
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # apt's _apt user writes here
        fetched = runner.run(["apt-get", "download", package], timeout=600, cwd=work)  # into the current folder
        debs = list(work.glob("*.deb"))
        if not debs:
            raise NotRunnable(f"cannot download the lab kernel {package}: {fetched.failure('apt-get download')}",
                              hint="check that Debian's package mirror is reachable, then `apt-get update`")
        unpacked = work / "x"
        runner.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], timeout=600, check=True,
                   what="unpacking the lab kernel")
        images = list((unpacked / "boot").glob("vmlinuz-*"))
        if not images or not (unpacked / "lib" / "modules" / version).is_dir():
            raise ToolError(f"{debs[0].name}: no boot/vmlinuz-* or lib/modules/{version} inside")
        progress(f"kernel: depmod {version}")
        runner.run(["depmod", "-b", str(unpacked), version], timeout=300, check=True, what="depmod")
        staged = work / "staged"
        staged.mkdir()
        shutil.move(str(images[0]), staged / "vmlinuz")
        (staged / "lib").mkdir()
        shutil.move(str(unpacked / "lib" / "modules"), staged / "lib" / "modules")
        (staged / "READY").write_text(package + "\n")
        if root.exists():
            shutil.rmtree(root)
        os.replace(staged, root)
    progress(f"kernel: {version} cached in {root}")
    return kernel
