"""The page cache before a cold repeat: dropped on every node, or the run says where it was not.

A cold profile promises reads from storage. When fio reads through the page cache (a directory target,
buffered), a drop that failed on one node (``sysctl`` refused: not root, a read-only ``/proc/sys``) leaves
that node reading what the layout or the last repeat left in memory: its figure is the cache's, not the
array's. Such a run's own verdict is ERROR (:func:`criterion`), never a note beside a PASS. Reads with
O_DIRECT (a raw device, a direct profile) do not go through the cache: the drops are still made and recorded,
and the verdict does not judge them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.tools.fio import Node

NAME = "page cache dropped before each cold repeat (node drops)"


@dataclass(frozen=True)
class CacheDrop(AsDict):
    node: str
    dropped: bool
    why_not: str = ""        # the failed command and what it printed

    def text(self) -> str:
        return "page cache dropped" if self.dropped else f"page cache NOT dropped on {self.node} ({self.why_not})"


def drop_caches(runner: Runner, node: Node) -> CacheDrop:
    """``sync`` then ``sysctl -w vm.drop_caches=3`` on a node; a refusal is recorded, never raised."""
    for argv, label in ((["sync"], "sync"), (["sysctl", "-q", "-w", "vm.drop_caches=3"], "drop-caches")):
        result = runner.run(argv, timeout=120, host=node.host, label=label)
        if not result.ok:
            said = (result.stderr or result.stdout).strip()[:120] or f"exit {result.returncode}"
            return CacheDrop(node.name, False, f"{' '.join(argv)}: {said}")
    return CacheDrop(node.name, True)


def drop_everywhere(runner: Runner, nodes: Sequence[Node]) -> tuple[CacheDrop, ...]:
    """Every node's drop, side by side (at most 8 at once), in the nodes' order."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(nodes), 8))) as pool:
        return tuple(pool.map(lambda n: drop_caches(runner, n), nodes))


def summary(drops: Sequence[CacheDrop], direct: bool) -> str:
    """The repeat's cache line: one node's drop as it is, several each named."""
    text = drops[0].text() if len(drops) == 1 else "; ".join(f"{d.node}: {d.text()}" for d in drops)
    return text + (" (reads with O_DIRECT: the cache is not involved)" if direct else "")


def criterion(drops_per_repeat: Sequence[Sequence[CacheDrop]]) -> Criterion:
    """Drops that worked against drops made, over every repeat and node: ERROR when one failed (that repeat's
    figure may be the page cache's), naming each failure once with the repeats it hit."""
    made = [d for drops in drops_per_repeat for d in drops]
    failed: dict[tuple[str, str], list[str]] = {}
    for index, drops in enumerate(drops_per_repeat, start=1):
        for d in (d for d in drops if not d.dropped):
            failed.setdefault((d.node, d.why_not), []).append(str(index))
    if failed:
        said = "; ".join(f"{node} in repeat{'s' * (len(repeats) > 1)} {', '.join(repeats)}: {why}" for (node, why), repeats in failed.items())
        return Criterion(NAME, Outcome.ERROR, len(made) - sum(map(len, failed.values())), len(made), "==", "",
                         "a cold repeat read through a page cache that was not dropped: its figure may be the "
                         f"cache's, not the array's; not dropped on {said}")
    return Criterion.compare(NAME, len(made), "==", len(made), detail="buffered reads: every drop worked")
