"""Honest restores (issue 18 item 5): a restore is judged by its effect, from the views fxprobe captures."""

import pytest

from fxprobe.faults.labprep import parse_array_view, parse_host_view
from fxprobe.faults.restored import drive_problem, path_problem

CTRLS = "".join(f"ctrl nvme{i} S{i:02d} nvme{i}n1\n" for i in range(4))
SERIALS = [f"S{i:02d}" for i in range(4)]


def view(mdstat: str, ctrls: str = CTRLS) -> dict:
    return parse_array_view(mdstat + "--fxprobe--\n" + ctrls)


def md(members: str, counts: str, extra: str = "") -> str:
    return (f"Personalities : [raid6]\nmd127 : active raid6 {members}\n"
            f"      1000 blocks super 1.2 level 6, 512k chunk, algorithm 2 {counts}\n{extra}\nunused devices: <none>\n")


def test_a_drive_back_and_recovering_is_restored():
    text = md("nvme0n1[4] nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]",
              "      [===>.....]  recovery = 12.5% (1/8) finish=1.0min speed=1K/sec")
    assert drive_problem(view(text), "S00", SERIALS, True) is None


def test_a_clean_array_is_restored():
    assert drive_problem(view(md("nvme0n1[0] nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/4] [UUUU]")), "S00",
                         SERIALS, True) is None


def test_a_drive_in_sync_in_its_role_is_restored_while_another_member_is_still_away():
    # two drives pulled; the first re-added resyncs from md's write-intent bitmap at once, the second is not back yet
    text = md("nvme0n1[0] nvme2n1[2] nvme3n1[3]", "[4/3] [U_UU]", "      bitmap: 1/1 pages [4KB], 1024KB chunk")
    roles = CTRLS + "".join(f"role md127 nvme{i}n1 {i}\n" for i in (0, 2, 3))
    assert drive_problem(view(text, roles), "S00", SERIALS, True) is None
    assert "is not a member" in drive_problem(view(text, roles), "S01", SERIALS, True)
    behind = md("nvme0n1[0] nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [U_UU]")   # back, its role not in sync
    assert "degraded and not recovering" in drive_problem(view(behind, roles), "S01", SERIALS, True)


@pytest.mark.parametrize("mdstat, ctrls, words", [
    (md("nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]"), CTRLS, "is not a member of md127 [4/3] [_UUU]"),
    (md("nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]"), CTRLS.replace("ctrl nvme0 S00 nvme0n1\n", ""),
     "not visible in the array guest"),
    (md("nvme0n1[0](F) nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]"), CTRLS, "faulty member"),
    (md("nvme0n1[4](S) nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]"), CTRLS, "spare"),
    ("Personalities :\nunused devices: <none>\n", CTRLS, "no md array holds"),
])
def test_what_is_still_broken_is_named(mdstat, ctrls, words):
    problem = drive_problem(view(mdstat, ctrls), "S00", SERIALS, True)
    assert problem and words in problem


def test_a_raid0_drive_only_has_to_be_visible():
    assert drive_problem(view("Personalities :\n"), "S00", SERIALS, False) is None


HOST = """subsys nvme-subsys0 nqn.x round-robin
ns nvme-subsys0 nvme0n1
path nvme-subsys0 nvme0 live tcp traddr=10.0.1.1,trsvcid=4420,src_addr=10.0.1.2
path nvme-subsys0 nvme1 {state} tcp traddr=10.0.2.1,trsvcid=4420,src_addr=10.0.2.2
"""


def test_a_path_over_the_link_must_be_live():
    assert path_problem(parse_host_view(HOST.format(state="live")), "10.0.2.1") is None
    problem = path_problem(parse_host_view(HOST.format(state="connecting")), "10.0.2.1")
    assert problem == "paths over 10.0.2.1 not live: nqn.x nvme1 connecting"
    assert path_problem(parse_host_view(HOST.format(state="connecting")), "10.0.1.1") is None


def test_a_host_md_member_must_be_back_and_recovering():
    from fxprobe.faults.restored import member_problem
    arrays = view(md("nvme0n1[4] nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]",
                     "      [>....]  recovery = 1.0% (1/8) finish=1.0min speed=1K/sec"))["md"]
    assert member_problem(arrays, "md127", "nvme0n1") is None
    gone = view(md("nvme1n1[1] nvme2n1[2] nvme3n1[3]", "[4/3] [_UUU]"))["md"]
    assert member_problem(gone, "md127", "nvme0n1") == "nvme0n1 is not a member of md127 [4/3] [_UUU]"
    assert member_problem(gone, "md0", "nvme0n1") == "no md array md0"
