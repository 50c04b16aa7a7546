"""Every parser, fed arbitrary, truncated or mutated input, parses or raises ParseError naming source and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fxprobe.core.errors import ParseError
from fxprobe.tools import fio, iperf3, nvme, perftest

FIXTURES = Path(__file__).parent / "fixtures"
SOURCE = "fuzzed-input"


def _fixture_texts(folder: str, pattern: str = "*") -> list[str]:
    """Real and built outputs; ``lab`` holds captures from the QEMU guests (when present)."""
    return [p.read_text(errors="replace") for p in sorted((FIXTURES / folder).glob(pattern))
            if p.is_file() and p.name != "README.md"]


# parser name -> (callable taking (text, source), real sample texts)
PARSERS = {
    "fio.parse_fio_json": (fio.parse_fio_json, _fixture_texts("fio", "*.json")),
    "fio.parse_fio_log": (fio.parse_fio_log, _fixture_texts("fio", "*.log")),
    "fio.parse_fio_hist_log": (fio.parse_fio_hist_log, _fixture_texts("fio", "*hist*.log")),
    "fio.parse_fio_version": (fio.parse_fio_version, ["fio-3.33\n"]),
    "perftest.parse_perftest_text": (perftest.parse_perftest_text, _fixture_texts("perftest", "*.txt") + _fixture_texts("lab", "*ib_*_bw*.txt")),
    "iperf3.parse_iperf3_json": (iperf3.parse_iperf3_json, _fixture_texts("iperf3", "*.json")),
    "nvme.parse_list": (nvme.parse_list, _fixture_texts("nvme", "list-[12]*.json") + _fixture_texts("lab", "*nvme-list.json")),
    "nvme.parse_list_verbose": (nvme.parse_list_verbose, _fixture_texts("nvme", "list-v-*.json") + _fixture_texts("lab", "*nvme-list-v*.json")),
    "nvme.parse_discover": (nvme.parse_discover, _fixture_texts("nvme", "discover-*.json") + _fixture_texts("lab", "*nvme-discover*.json")),
    "nvme.parse_smart_log": (nvme.parse_smart_log, _fixture_texts("nvme", "smart-log-*.json") + _fixture_texts("lab", "*nvme-smart-log*.json")),
    "nvme.parse_disconnect": (nvme.parse_disconnect, _fixture_texts("nvme", "disconnect-*.txt") + _fixture_texts("lab", "*nvme-disconnect*.txt")),
    "nvme.parse_connect": (lambda text, source: nvme.parse_connect(text, "", 0, source),
                           ['{\n  "device":"nvme0"\n}\n', ""]),
    "nvme.parse_nvme_version": (nvme.parse_nvme_version, ["nvme version 2.3 (git 2.3)\n"]),
}


def register(name, parser, samples):
    PARSERS[name] = (parser, samples)


def check(parser, text: str) -> None:
    try:
        parser(text, SOURCE)
    except ParseError as exc:
        assert SOURCE in str(exc), str(exc)
        assert exc.field, str(exc)


def mutate_json(value, path_choice: int, replacement):
    """Replace the path_choice-th node (pre-order) of a JSON tree with replacement."""
    counter = [path_choice]

    def walk(node):
        if counter[0] == 0:
            counter[0] -= 1
            return replacement
        counter[0] -= 1
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node
    return walk(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6)

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = sorted(PARSERS)


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.text(max_size=400))
def test_arbitrary_text(name, data):
    check(PARSERS[name][0], data)


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data())
def test_truncated_real_output(name, data):
    parser, samples = PARSERS[name]
    if not samples:
        pytest.skip("no real sample for this parser yet")
    text = data.draw(st.sampled_from(samples))
    cut = data.draw(st.integers(0, len(text)))
    check(parser, text[:cut])


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data())
def test_mutated_real_output(name, data):
    parser, samples = PARSERS[name]
    if not samples:
        pytest.skip("no real sample for this parser yet")
    text = data.draw(st.sampled_from(samples))
    at = data.draw(st.integers(0, len(text)))
    length = data.draw(st.integers(0, 20))
    insert = data.draw(st.text(alphabet=st.sampled_from(list(',:{}[]"0123456789.-e \n\tabcxyz')), max_size=10))
    check(parser, text[:at] + insert + text[at + length:])


def _strict_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


JSON_SAMPLES = {name: [s for s in samples if _strict_json(s) is not None]
                for name, (_, samples) in PARSERS.items()}


@pytest.mark.parametrize("name", [n for n in NAMES if JSON_SAMPLES[n]])
@FUZZ
@given(data=st.data())
def test_json_tree_mutations(name, data):
    """Replace any node of a real JSON output by any JSON value (wrong types, strings, nulls, huge ints)."""
    tree = json.loads(data.draw(st.sampled_from(JSON_SAMPLES[name])))
    node = data.draw(st.integers(0, 400))
    mutated = mutate_json(tree, node, data.draw(json_values))
    check(PARSERS[name][0], json.dumps(mutated))
