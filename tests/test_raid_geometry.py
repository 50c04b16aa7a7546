"""RAID geometry for several pulled drives (issue 14 item 3): which combinations an md array survives."""

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from fxprobe.core.errors import BadInput
from fxprobe.faults.geometry import copy_sets, data_lost
from fxprobe.faults.labprep import parse_array_view
from fxprobe.faults.methods import geometry_refusal
from fxprobe.faults.scenario import parse_scenario


def chunks_lost_raid10_near(n: int, near: int, missing: set[int]) -> bool:
    """Independent model: lay chunks out as md's raid10 near layout does and look for one with no copy left."""
    for chunk in range(n * near):                 # the placement repeats after n chunks' worth of copies
        copies = {(chunk * near + j) % n for j in range(near)}
        if copies <= missing:
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)),
                                                      st.integers(2, min(3, n)))))
def test_raid10_near_matches_the_chunk_layout(args):
    n, missing, near = args
    assert (data_lost("raid10", n, missing, layout=near | 0x100) is not None) == \
        chunks_lost_raid10_near(n, near, missing)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["raid0", "raid1", "raid5", "raid6"]).flatmap(
    lambda level: st.integers(2 if level in ("raid0", "raid1") else 3 if level == "raid5" else 4, 16).flatmap(
        lambda n: st.tuples(st.just(level), st.just(n), st.sets(st.integers(0, n - 1))))))
def test_parity_and_mirror_levels_count_missing_members(args):
    level, n, missing = args
    survives = {"raid0": 0, "raid1": n - 1, "raid5": 1, "raid6": 2}[level]
    assert (data_lost(level, n, missing) is None) == (len(missing) <= survives)


def test_raid10_four_near_two_is_two_mirror_pairs():
    assert copy_sets(4, 0x102) == [frozenset({0, 1}), frozenset({2, 3})]
    assert data_lost("raid10", 4, {0, 2}) is None and data_lost("raid10", 4, {1, 3}) is None
    assert "roles 0+1 hold every copy" in data_lost("raid10", 4, {0, 1})
    assert data_lost("raid10", 3, {0, 2}) is not None       # odd count: every pair shares a chunk


@pytest.mark.parametrize("n, missing", [(4, {1, 2}), (6, {5, 0})])
def test_far_layouts_count_every_neighbouring_run(n, missing):
    assert data_lost("raid10", n, missing, layout=0x201) is not None     # far-2: neighbours share copies


def view(level: str, members: int, counts: str, roles: dict[int, int] | None = None, layout: int | None = None):
    names = " ".join(f"nvme{i}n1[{i}]" for i in range(members))
    text = (f"md127 : active {level} {names}\n      1000 blocks super 1.2 {counts}\n--fxprobe--\n"
            + (f"mdinfo md127 {layout}\n" if layout is not None else "")
            + "".join(f"role md127 nvme{d}n1 {r}\n" for d, r in (roles or {}).items()))
    return parse_array_view(text)["md"]


def test_the_refusal_names_the_combination_and_why():
    raid6 = view("raid6", 6, "[6/6] [UUUUUU]")
    assert geometry_refusal(["nvme0n1", "nvme1n1"], raid6) is None
    three = geometry_refusal(["nvme0n1", "nvme1n1", "nvme2n1"], raid6)
    assert "pulling nvme0n1 + nvme1n1 + nvme2n1 from md127 (raid6, 6/6 members working)" in three
    assert "3 of 6 members missing (roles 0, 1, 2): raid6 survives 2 missing" in three


def test_a_member_missing_already_counts():
    degraded = view("raid6", 5, "[6/5] [UUUUU_]")
    assert "3 of 6 members missing (roles 0, 1, 5)" in geometry_refusal(["nvme0n1", "nvme1n1"], degraded)


def test_raid10_uses_md_roles_not_mdstat_numbers():
    # after an --add, nvme0n1 shows as [4] in mdstat but holds role 0: it pairs with role 1
    roles = {0: 0, 1: 1, 2: 2, 3: 3}
    md = view("raid10", 4, "[4/4] [UUUU]", roles=roles, layout=258)
    assert geometry_refusal(["nvme0n1", "nvme2n1"], md) is None
    assert "roles 0+1" in geometry_refusal(["nvme0n1", "nvme1n1"], md)
    swapped = view("raid10", 4, "[4/4] [UUUU]", roles={0: 2, 1: 1, 2: 0, 3: 3}, layout=258)
    assert geometry_refusal(["nvme0n1", "nvme2n1"], swapped) is None          # roles 2 and 0
    assert "roles 2+3" in geometry_refusal(["nvme0n1", "nvme3n1"], swapped)     # mdstat [0] and [3] would pass


def scenario(fault: str):
    return parse_scenario(f'[fault]\nkind = "drive-pull"\n{fault}\n[timing]\n[criteria]\n', "x.toml")


def test_a_scenario_names_several_drives_one_way():
    assert scenario("slots = [0, 1]\ndelay_s = 2").fault["slots"] == [0, 1]
    for bad, words in (("slot = 0\nslots = [1, 2]", "slot and slots"), ("slots = [1, 1]", "names a drive twice"),
                       ('slots = [1]\nserials = ["S1"]', "slots and serials")):
        with pytest.raises(BadInput) as caught:
            scenario(bad)
        assert words in str(caught.value) and "x.toml" in str(caught.value)
