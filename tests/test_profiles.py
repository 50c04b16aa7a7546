"""Profiles: shipped TOML files, the derivation arithmetic, and validation errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from fxprobe.workload import models
from fxprobe.core.errors import BadInput
from fxprobe.workload.jobfile import Target, job_text
from fxprobe.workload.profiles import available, derive, load_profile, load_profile_file, parse_size, profile_from_dict

SHIPPED = sorted(available())


def test_all_issue_profiles_are_shipped():
    assert {"qwen25-32b-cold-restore", "qwen3-coder-480b-tp8-readback", "qwen3-coder-480b-tp4x2-readback",
            "kv-writeback-prefill", "checkpoint-write", "model-load-8way", "small-file-dataset"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_profile_derives_and_makes_a_job_file(name):
    d = derive(load_profile(name))
    assert d.block_size > 0 and d.file_size > 0 and d.jobs >= 1 and d.iodepth >= 1
    assert d.file_count * d.file_size == d.total_bytes
    text = job_text(d, Target("/mnt/kv", False))
    assert f"numjobs={d.jobs}" in text and "directory=/mnt/kv" in text


def test_qwen25_32b_chunk_is_64_mib():
    d = derive(load_profile("qwen25-32b-cold-restore"))
    assert d.chunk_bytes == 64 * 1024 * 1024 == d.block_size == d.file_size
    assert d.file_count == 16 * 128 and d.jobs == 16
    assert any("67,108,864 B (64 MiB)" in line for line in d.lines)


def test_qwen3_coder_480b_tp8_rank_chunk():
    d = derive(load_profile("qwen3-coder-480b-tp8-readback"))
    assert d.chunk_bytes == 8_126_464 == d.block_size
    assert d.file_size == 8_126_464 + 28 and d.offset == 28 and not d.direct  # fs:// header
    assert any("= 8,126,464 B" in line for line in d.lines)


def test_tp4x2_shares_one_pool_and_doubles_the_threads():
    tp8 = derive(load_profile("qwen3-coder-480b-tp8-readback"))
    tp4 = derive(load_profile("qwen3-coder-480b-tp4x2-readback"))
    assert tp4.chunk_bytes == 2 * tp8.chunk_bytes
    assert tp4.jobs == 2 * tp8.jobs
    assert tp4.file_count == tp8.file_count // 2      # 4 ranks' files, shared by both instances


def test_checkpoint_and_model_load():
    c = derive(load_profile("checkpoint-write"))
    assert c.writes and c.jobs == 8 and c.rw == "write" and c.direct
    assert abs(c.total_bytes - 65.6e9) < 8 * 1024 * 1024
    m = derive(load_profile("model-load-8way"))
    assert m.jobs == 8 and m.rw == "read" and m.cold
    s = derive(load_profile("small-file-dataset"))
    assert s.block_size == s.file_size == 160 * 1024


@settings(max_examples=300, deadline=None)
@given(layers=st.integers(1, 200), kv_heads=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       head_dim=st.sampled_from([64, 80, 96, 128, 256]), tp=st.sampled_from([1, 2, 4, 8, 16]),
       tokens=st.integers(1, 4096), dtype=st.sampled_from(["bf16", "fp8", "fp32"]))
def test_chunk_bytes_formula_for_any_valid_geometry(layers, kv_heads, head_dim, tp, tokens, dtype):
    data = {"kind": "kv-read", "name": "h",
            "model": {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim, "kv_dtype": dtype},
            "kv": {"tp": tp, "chunk_tokens": tokens, "context_tokens": tokens * 4, "concurrency": 2,
                   "threads": 1}}
    d = derive(profile_from_dict(data, "h.toml"))
    h_rank = max(1, kv_heads // tp)
    assert d.chunk_bytes == 2 * layers * tokens * h_rank * head_dim * models.DTYPE_BYTES[dtype]
    assert d.file_count == 2 * 4 * tp


@settings(max_examples=100, deadline=None)
@given(scale=st.floats(0.0001, 1.0), name=st.sampled_from(SHIPPED))
def test_scaled_working_set_stays_within_budget(scale, name):
    full = derive(load_profile(name))
    d = derive(load_profile(name), scale=scale)
    assert d.total_bytes <= max(full.total_bytes * scale, d.jobs * 4096 * 2) + d.jobs * d.file_size
    assert d.block_size <= d.file_size and d.block_size % 512 == 0 or d.offset


def test_size_cap_makes_a_small_run():
    d = derive(load_profile("qwen25-32b-cold-restore"), max_bytes=64 << 20)
    assert d.total_bytes <= 64 << 20 and d.scaled and d.jobs == 16
    assert d.block_size == d.file_size and d.block_size % 4096 == 0


@pytest.mark.parametrize("data, words", [
    ({"kind": "kv-read", "model": {"name": "GPT-9"}}, ["unknown model 'GPT-9'", "Qwen2.5-32B-Instruct"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"chunk_tokens": 0}}, ["kv.chunk_tokens", ">= 1 (got 0)"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"backend": "nfs"}},
     ["kv.backend", "'nfs'", "'localdisk', 'fs' or 'block'"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"threadz": 4}}, ["'kv.threadz'", "threads"]),
    ({"kind": "kv-reed"}, ["'kind'", "kv-read"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"tp": 3}}, ["kv.tp", "tp=3"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"tp": "8"}}, ["kv.tp", "expected a whole number (got '8')"]),
    # impossible inputs (issue 13): NaN/inf, negatives, fractions where a count is meant, zero timing
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "run": {"runtime": float("nan")}},
     ["field 'run.runtime': must be a finite number (got nan)"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "run": {"runtime": float("inf")}},
     ["field 'run.runtime': must be a finite number (got inf)"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "run": {"ramp": -1}}, ["field 'run.ramp': must be >= 0"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "run": {"steady_tolerance_pct": 0}},
     ["field 'run.steady_tolerance_pct': must be > 0"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"zipf_theta": float("nan")}},
     ["field 'kv.zipf_theta': must be a finite number"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"threads": 2.5}},
     ["field 'kv.threads': expected a whole number (got 2.5)"]),
    ({"kind": "kv-read", "model": {"name": "Llama-3.1-8B"}, "kv": {"odirect": 1}},
     ["field 'kv.odirect': expected true or false (got 1)"]),
    ({"kind": "small-files", "io": {"file_size": "-4K"}}, ["field 'io.file_size'", "not a size"]),
    ({"kind": "small-files", "io": {"iodepth": 0}}, ["field 'io.iodepth': must be >= 1 (got 0)"]),
    ({"kind": "kv-read", "model": {"layers": 4}}, ["[model] needs 'name'"]),
    ({"kind": "kv-read", "model": "Llama"}, ["field 'model': expected a table"]),
])
def test_validation_names_file_key_and_allowed_values(data, words):
    with pytest.raises(BadInput) as info:
        derive(profile_from_dict(data, "bad.toml"))
    message = str(info.value)
    assert "bad.toml" in message
    for word in words:
        assert word in message


def test_a_job_count_that_does_not_fit():
    data = {"kind": "kv-read", "model": {"name": "Llama-3.1-8B"},
            "kv": {"context_tokens": 512, "concurrency": 1, "threads": 16}}
    with pytest.raises(BadInput, match="16 jobs do not fit in 2 files"):
        derive(profile_from_dict(data, "x.toml"))
    data = {"kind": "checkpoint-write", "io": {"total_bytes": "4M", "jobs": 8, "block_size": "1M"}}
    with pytest.raises(BadInput, match="8 jobs do not fit"):
        derive(profile_from_dict(data, "y.toml"))
    data = {"kind": "small-files", "io": {"jobs": 5000, "file_count": 10**6}}
    with pytest.raises(BadInput, match="at most 4096"):
        derive(profile_from_dict(data, "z.toml"))


def test_toml_errors(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text("kind = \n")
    with pytest.raises(BadInput, match="broken.toml: not valid TOML"):
        load_profile_file(bad)
    with pytest.raises(BadInput, match="unknown profile 'nope'"):
        load_profile("nope")


def test_parse_size():
    assert parse_size("160K") == 163840 and parse_size("65.6GB") == 65_600_000_000
    assert parse_size("64MiB") == 64 << 20 and parse_size(4096) == 4096
    for bad in ("0", "-1M", "12 parsecs", True):
        with pytest.raises(BadInput):
            parse_size(bad)


def test_warm_profile_uses_zipf_reuse_and_keeps_the_cache():
    data = {"kind": "kv-read", "model": {"name": "Qwen2.5-7B-Instruct"},
            "kv": {"cache": "warm", "zipf_theta": 1.2, "concurrency": 4, "threads": 4}}
    d = derive(profile_from_dict(data, "warm.toml"))
    assert not d.cold and d.file_service == "zipf:1.2" and d.chunk_bytes == 14 << 20
    assert "file_service_type=zipf:1.2" in job_text(d, Target("/mnt/kv", False))
    assert "random_distribution=zipf:1.2" in job_text(d, Target("/dev/nvme0n1", True))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("block", [False, True])
def test_fio_parses_every_generated_job_file(tmp_path, name, block):
    import shutil
    from fxprobe.core.runner import Runner
    if not shutil.which("fio"):
        pytest.skip("fio missing")
    d = derive(load_profile(name), max_bytes=64 << 20)
    target = Target("/dev/loop7" if block else str(tmp_path), block)
    for mode in ("layout", "measure"):
        job = tmp_path / f"{mode}.fio"
        job.write_text(job_text(d, target, mode=mode, log_prefix=str(tmp_path / "log")))
        result = Runner(None).run(["fio", "--parse-only", str(job)], timeout=30)
        assert result.ok, result.stderr


def test_set_overrides_are_typed_and_checked_like_the_file():
    from fxprobe.workload.profiles import check_overrides
    assert check_overrides({"iodepth": "8", "odirect": "true", "cache": "warm", "zipf_theta": "1.1"}) == \
        {"iodepth": 8, "odirect": True, "cache": "warm", "zipf_theta": 1.1}
    for item, words in ((("iodepth", "abc"), "--set iodepth=abc: field 'iodepth': expected a whole number"),
                        (("threads", "-1"), "--set threads=-1: field 'threads': must be >= 1"),
                        (("threads", "2.5"), "expected a whole number (got '2.5')"),
                        (("zipf_theta", "nan"), "must be a finite number"),
                        (("block_size", "12Q"), "'12Q' is not a size"),
                        (("nope", "1"), "'nope' is not a profile key")):
        with pytest.raises(BadInput, match=None) as info:
            check_overrides(dict([item]))
        assert words in str(info.value)
    d = derive(load_profile("qwen25-32b-cold-restore"), overrides={"iodepth": "4", "cache": "warm"})
    assert d.iodepth == 4 and not d.cold
