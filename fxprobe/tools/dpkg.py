"""dpkg adapter: which Debian package installed a program, and is the file still the one it installed.

A figure is only as good as the program that printed it: a wrapped tool that no package installed, or that was
changed after its package installed it, can print anything. dpkg answers both questions from its own records:

- ``dpkg-query --search PATH`` prints ``PACKAGE[, PACKAGE...]: PATH`` (``PACKAGE:ARCH`` for a multi-arch one,
  ``diversion by ...`` lines for a diverted file), and ``dpkg-query: no path found matching pattern PATH`` on
  stderr with exit code 1 when no package owns the path;
- ``ADMINDIR/info/PACKAGE[:ARCH].md5sums`` holds ``MD5  relative/path`` for every regular file the package
  installed (what ``dpkg --verify`` compares with);
- ``dpkg-query --show --showformat '${Version}' PACKAGE`` prints the installed version.

On a merged-/usr system (Debian 12) ``/usr/bin/ip`` is the file the package lists as ``/bin/ip``: both names are
asked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.data import AsDict
from fxprobe.core.errors import NotRunnable, ParseError
from fxprobe.core.hosts import LOCAL, Host, LocalHost, never_connected
from fxprobe.core.runner import PACKAGE_OF, Runner

ADMINDIR = Path("/var/lib/dpkg")
MERGED = ("/bin/", "/sbin/", "/lib/", "/lib64/")
TIMEOUT_S = 20

PACKAGED = "packaged, unchanged"
CHANGED = "CHANGED since its package installed it"
UNPACKAGED = "NOT INSTALLED BY A PACKAGE"
UNCHECKED = "not checked"
NOT_TRACEABLE = (CHANGED, UNPACKAGED, UNCHECKED)   # a figure such a program printed is not tied to a release
MEASURING = ("fio", "ib_read_bw", "ib_write_bw", "iperf3")   # what prints the figures on other nodes (witness)
ORIGIN_SCRIPT = Path(__file__).with_name("origin.sh")


@dataclass(frozen=True)
class ToolOrigin(AsDict):
    """Where a wrapped tool's binary came from: ``state`` is PACKAGED, CHANGED, UNPACKAGED or UNCHECKED."""

    path: str                # the file that runs (symbolic links resolved)
    sha256: str
    state: str
    package: str = ""
    version: str = ""
    detail: str = ""         # what was compared (md5 of the file and of the package's record), or why not

    @property
    def trusted(self) -> bool:
        return self.state == PACKAGED

    def text(self) -> str:
        owner = f"{self.package} {self.version}".strip()
        return f"{self.path}: {self.state}" + (f" ({owner})" if owner else "") + (f"; {self.detail}" if self.detail else "")


def merged_names(path: str) -> list[str]:
    """``path`` and the name the same file has on the other side of the /usr merge."""
    if path.startswith("/usr/") and path[4:].startswith(MERGED):
        return [path, path[4:]]
    if path.startswith(MERGED):
        return [path, "/usr" + path]
    return [path]


def parse_search(output: str, path: str, source: str = "dpkg-query --search") -> str | None:
    """The package that owns ``path`` (the first one named), or None; diversion lines are passed over."""
    if not isinstance(output, str):
        raise ParseError(source, "output", "expected text")
    for line in output.splitlines():
        if line.startswith("diversion by ") or ": " not in line:
            continue
        packages, owned = line.split(": ", 1)
        if owned.strip() == path:
            return packages.split(",")[0].strip()
    return None


def parse_md5sums(text: str, source: str) -> dict[str, str]:
    """``MD5  relative/path`` lines -> {"/relative/path": md5}."""
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, relative = line.partition("  ")
        if not sep or len(digest) != 32 or any(c not in "0123456789abcdef" for c in digest):
            raise ParseError(source, f"line {number}", f"expected 'MD5  path', got {line[:60]!r}")
        sums["/" + relative.lstrip("/")] = digest
    return sums


def file_digests(path: Path) -> tuple[str, str]:
    """(md5, sha256) of a file, read once."""
    md5, sha256 = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            md5.update(block)
            sha256.update(block)
    return md5.hexdigest(), sha256.hexdigest()


def package_md5sums(package: str, admindir: Path = ADMINDIR) -> dict[str, str]:
    """The package's md5sums ({} when dpkg keeps none for it)."""
    name = package.split(":")[0]
    info = admindir / "info"
    for candidate in [info / f"{package}.md5sums", info / f"{name}.md5sums", *sorted(info.glob(f"{name}:*.md5sums"))]:
        if candidate.is_file():
            return parse_md5sums(candidate.read_text(errors="replace"), str(candidate))
    return {}


def _search(runner: Runner, names: list[str], admindir: Path, host: Host = LOCAL) -> dict[str, str]:
    """{name: package} for each of ``names`` some package owns: one ``dpkg-query --search`` for all of them (it
    reads every package's file list once, seconds in an emulated guest); exit code 1 only says one was not found."""
    result = runner.run(["dpkg-query", f"--admindir={admindir}", "--search", *names], timeout=TIMEOUT_S, host=host,
                        always=True, label="dpkg-search")
    owners = {}
    for name in names:
        package = parse_search(result.stdout, name)
        if package:
            owners[name] = package
    return owners


def _versions(runner: Runner, packages: set[str], admindir: Path, host: Host = LOCAL) -> dict[str, str]:
    if not packages:
        return {}
    result = runner.run(["dpkg-query", f"--admindir={admindir}", "--show", "--showformat", "${Package} ${Version}\n",
                         *sorted(packages)], timeout=TIMEOUT_S, host=host, always=True, label="dpkg-version")
    return parse_versions(result.stdout)


def parse_versions(output: str) -> dict[str, str]:
    """``dpkg-query --show --showformat '${Package} ${Version}\\n'`` -> {package: version}."""
    return dict(line.split(" ", 1) for line in output.splitlines() if " " in line)


def _judged(real: Path, md5: str, sha256: str, package: str, version: str, sums: dict[str, str]) -> ToolOrigin:
    recorded = next((sums[n] for n in merged_names(str(real)) if n in sums), None)
    if recorded is None:
        return ToolOrigin(str(real), sha256, UNCHECKED, package, version,
                          f"{package} keeps no md5 for {real}: the file is not compared")
    if recorded != md5:
        return ToolOrigin(str(real), sha256, CHANGED, package, version, f"md5 {md5}, the package's record says {recorded}")
    return ToolOrigin(str(real), sha256, PACKAGED, package, version, f"md5 {md5} as the package's record")


def tool_origins(runner: Runner, found: dict[str, str], expected: dict[str, str] | None = None,
                 admindir: Path = ADMINDIR) -> dict[str, ToolOrigin]:
    """Where each program came from, by dpkg's own records: ``found`` maps a tool's name to the path PATH gave,
    ``expected`` to the package that should have installed it (its md5sums are read first; a file it does not
    list is searched among all packages, in one call)."""
    expected = expected or {}
    out: dict[str, ToolOrigin] = {}
    files: dict[str, tuple[Path, str, str]] = {}
    digests: dict[Path, tuple[str, str]] = {}       # one read per file (nvme-cli and libnvme are one binary)
    for name, path in found.items():
        real = Path(path).resolve()
        try:
            digests[real] = digests.get(real) or file_digests(real)
        except OSError as exc:
            out[name] = ToolOrigin(str(real), "", UNCHECKED, detail=f"cannot read {real}: {exc.strerror}")
            continue
        files[name] = (real, *digests[real])
    sums: dict[str, dict[str, str]] = {}            # one read of each package's md5sums

    def listed(package: str) -> dict[str, str]:
        if package not in sums:
            sums[package] = package_md5sums(package, admindir)
        return sums[package]

    owners = {}
    for name, (real, _, _) in files.items():
        package = expected.get(name)
        if package and any(n in listed(package) for n in merged_names(str(real))):
            owners[name] = package
    unknown = [name for name in files if name not in owners]
    try:
        if unknown:
            names = sorted({n for name in unknown for n in merged_names(str(files[name][0]))})
            searched = _search(runner, names, admindir)
            for name in unknown:
                package = next((searched[n] for n in merged_names(str(files[name][0])) if n in searched), None)
                if package:
                    owners[name] = package
        versions = _versions(runner, set(owners.values()), admindir)
    except NotRunnable:
        return {**out, **{name: ToolOrigin(str(real), sha256, UNCHECKED,
                                           detail="no dpkg-query on this host: the origin is not checked")
                          for name, (real, _, sha256) in files.items()}}
    for name, (real, md5, sha256) in files.items():
        package = owners.get(name)
        if package is None:
            out[name] = ToolOrigin(str(real), sha256, UNPACKAGED, detail=f"no package in {admindir} lists {real}")
        else:
            out[name] = _judged(real, md5, sha256, package, versions.get(package.split(":")[0], ""), listed(package))
    return out


# -- a program on another node (SSH, a lab guest) -------------------------------------------------------------------
def parse_origin_facts(output: str, source: str) -> dict:
    """origin.sh's output -> {"path", "real", "md5", "sha256", "version", "sums": {"/usr/bin/fio": md5}}, or
    {"missing": why}."""
    head, _, sums = output.partition("\nmd5sums\n")
    facts: dict = {}
    for line in head.splitlines():
        key, _, value = line.partition(" ")
        facts[key] = value.strip()
    if "missing" in facts:
        return {"missing": facts["missing"]}
    for key in ("path", "real", "md5", "sha256"):
        if not facts.get(key):
            raise ParseError(source, key, f"origin.sh printed no {key} line")
    return {**facts, "sums": parse_md5sums(sums, source)}


def _owner_elsewhere(runner: Runner, host: Host, real: str) -> tuple[str, dict[str, str], str]:
    """The package that lists ``real`` when the expected one does not: (package, its md5sums, version)."""
    names = merged_names(real)
    searched = _search(runner, names, ADMINDIR, host)
    package = next((searched[n] for n in names if n in searched), None)
    if package is None:
        return "", {}, ""
    listed = runner.run(["cat", str(ADMINDIR / "info" / f"{package}.md5sums")], timeout=TIMEOUT_S, host=host,
                        always=True, label="dpkg-md5sums")
    try:
        sums = parse_md5sums(listed.stdout, f"{package}.md5sums on {host.name}") if listed.ok else {}
    except ParseError:
        sums = {}
    return package, sums, _versions(runner, {package}, ADMINDIR, host).get(package.split(":")[0], "")


def remote_origin(runner: Runner, host: Host, program: str) -> ToolOrigin:
    """Where ``program`` on ``host`` comes from, judged as :func:`tool_origins` judges a local one: origin.sh fed to
    the node's sh prints the file, its digests and its expected package's md5sums (one command); only a file that
    package does not list costs a ``dpkg-query --search`` there."""
    package = PACKAGE_OF.get(program, "")
    result = runner.run(["sh", "-s", "--", str(ADMINDIR), program, package], timeout=TIMEOUT_S, host=host,
                        input=ORIGIN_SCRIPT.read_text(), always=True, label=f"origin-{program}",
                        retry_if=never_connected, attempts=3)
    if not result.ok:
        return ToolOrigin("", "", UNCHECKED, detail=f"on {host.name}: {result.failure('origin.sh')}")
    try:
        facts = parse_origin_facts(result.stdout, f"origin.sh on {host.name}")
    except ParseError as exc:
        return ToolOrigin("", "", UNCHECKED, detail=str(exc))
    if "missing" in facts:
        return ToolOrigin("", "", UNCHECKED, detail=f"on {host.name}: {facts['missing']}")
    real, sums, version = facts["real"], facts["sums"], facts.get("version", "")
    if not any(n in sums for n in merged_names(real)):
        package, sums, version = _owner_elsewhere(runner, host, real)
        if not package:
            return ToolOrigin(real, facts["sha256"], UNPACKAGED, detail=f"no package on {host.name} lists {real}")
    return _judged(Path(real), facts["md5"], facts["sha256"], package, version, sums)


def witness(runner: Runner, host: Host, program: str) -> None:
    """Before ``program`` measures on another node: record once per run, in the run's origins.jsonl, where that
    node's copy comes from (this machine's tools are in environment.json already)."""
    rundir = runner.rundir
    if isinstance(host, LocalHost) or runner.dry_run or rundir is None:
        return
    if any(o.get("host") == host.name and o.get("program") == program for o in rundir.origins()):
        return
    rundir.record_origin({"host": host.name, "program": program, **remote_origin(runner, host, program).to_dict()})
