"""A stand-in for ``vllm bench serve --save-result --result-filename FILE`` (vLLM needs torch and a model server,
which this machine cannot run): it sleeps ``--seconds``, then prints the summary and saves the result file in the
shapes vllm/benchmarks/serve.py does (its format strings; figures by its calculate_metrics formulas from seeded
per-request samples). ``--claim-duration S`` writes another duration (and the rates from it) than it ran;
``--edit-after FIELD=FACTOR`` changes one saved figure after printing the summary (a file edited after the run),
``--edit-after rates=FACTOR`` every rate and the duration alike (an edit the file's own counts still agree with)."""

from __future__ import annotations

import argparse
import json
import time

import numpy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--result-filename", required=True)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--claim-duration", type=float, default=None)
    parser.add_argument("--edit-after", default=None)
    parser.add_argument("--exit", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    time.sleep(args.seconds)
    duration = args.claim_duration or (time.perf_counter() - started)
    rng = numpy.random.default_rng(11)
    ttfts = [float(x) for x in rng.uniform(0.4, 9.0, 48)]
    outs, ins = [int(x) for x in rng.integers(64, 512, 48)], [4096] * 48
    done, out, inp = len(ttfts), sum(outs), sum(ins)
    result = {"date": "20261207-120000", "backend": "vllm", "model_id": "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",
              "max_concurrency": 8, "duration": duration, "completed": done, "failed": 0,
              "total_input_tokens": inp, "total_output_tokens": out, "request_throughput": done / duration,
              "output_throughput": out / duration, "total_token_throughput": (inp + out) / duration,
              "mean_ttft_ms": float(numpy.mean(ttfts)) * 1000, "median_ttft_ms": float(numpy.median(ttfts)) * 1000,
              "p99_ttft_ms": float(numpy.percentile(ttfts, 99)) * 1000}
    print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print("{:<40} {:<10}".format("Successful requests:", done))
    print("{:<40} {:<10}".format("Failed requests:", 0))
    print("{:<40} {:<10}".format("Maximum request concurrency:", 8))
    print("{:<40} {:<10.2f}".format("Benchmark duration (s):", duration))
    print("{:<40} {:<10}".format("Total input tokens:", inp))
    print("{:<40} {:<10}".format("Total generated tokens:", out))
    print("{:<40} {:<10.2f}".format("Request throughput (req/s):", result["request_throughput"]))
    print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", result["output_throughput"]))
    print("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", result["total_token_throughput"]))
    print("{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"))
    print("{:<40} {:<10.2f}".format("Mean TTFT (ms):", result["mean_ttft_ms"]))
    print("{:<40} {:<10.2f}".format("Median TTFT (ms):", result["median_ttft_ms"]))
    print("{:<40} {:<10.2f}".format("P99 TTFT (ms):", result["p99_ttft_ms"]))
    print("=" * 50)
    if args.edit_after:
        field, factor = args.edit_after.split("=")
        if field == "rates":            # every rate raised and the duration cut alike: consistent with itself
            result["duration"] /= float(factor)
            for rate in ("request_throughput", "output_throughput", "total_token_throughput"):
                result[rate] = {"request_throughput": done, "output_throughput": out,
                                "total_token_throughput": inp + out}[rate] / result["duration"]
        else:
            result[field] *= float(factor)
    with open(args.result_filename, "w", encoding="utf-8") as out_file:
        json.dump(result, out_file)
    raise SystemExit(args.exit)


if __name__ == "__main__":
    main()
