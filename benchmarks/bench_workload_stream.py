"""Streaming check for the ShareGPT loader: a file of a few hundred MB is read with peak memory
far below its size.

    python benchmarks/bench_workload_stream.py [--size-mb 300] [--seed 0] [--keep]

It writes a ShareGPT-style JSON list of invented conversations into a temporary folder (the
writer streams too), then loads it in a fresh Python process (so the generator's memory does
not count) and prints that process's peak resident set size (``resource.getrusage``), the
RSS after imports and before loading, and the throughput. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

_WORDS = (
    "the", "a", "of", "to", "and", "in", "is", "it", "for", "on", "with", "as", "was", "at",
    "by", "an", "be", "this", "that", "from", "or", "have", "kv", "cache", "prefill", "token",
    "model", "memory", "link", "bandwidth", "compute", "layer", "host", "device", "request",
    "batch", "attention", "offload", "transfer", "latency", "throughput",
)


def _pool(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def generate(path: Path, size_bytes: int, seed: int) -> tuple[int, int]:
    """Write conversations until the file reaches ``size_bytes``; returns (conversations,
    user turns)."""
    rng = random.Random(seed)
    pool = _pool(rng, 1 << 20)
    conversations = turns = written = 0
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("[\n")
        written += 2
        while written < size_bytes:
            messages = []
            for j in range(rng.randint(1, 8)):
                user = j % 2 == 0
                length = rng.randint(10, 400) if user else rng.randint(200, 3000)
                start = rng.randrange(len(pool) - length)
                messages.append({"from": "human" if user else "gpt",
                                 "value": pool[start:start + length]})
                turns += user
            text = json.dumps({"id": f"conv-{conversations}", "conversations": messages},
                              indent=1)
            if conversations:
                text = ",\n" + text
            handle.write(text)
            written += len(text)
            conversations += 1
        handle.write("\n]\n")
    return conversations, turns


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def load(path: Path) -> None:
    """Child process: load the file, print one JSON line of measurements."""
    from kvroof.workload.sharegpt import load_sharegpt
    from kvroof.workload.stats import describe

    before = _rss_mib()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the heuristic's "approximate" notice
        workload = load_sharegpt(path)
    seconds = time.perf_counter() - start
    stats = describe(workload)
    print(json.dumps({
        "rss_before_mib": before,
        "peak_rss_mib": _rss_mib(),
        "seconds": seconds,
        "requests": len(workload),
        "median_k": stats.cached_tokens.p50,
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=300.0, help="file size in MB (300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument("--load", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load is not None:
        load(args.load)
        return
    folder = Path(tempfile.mkdtemp(prefix="kvroof-bench-"))
    path = folder / "sharegpt_big.json"
    start = time.perf_counter()
    conversations, turns = generate(path, int(args.size_mb * 1e6), args.seed)
    size = path.stat().st_size
    print(f"generated {path}: {size / 1e6:.1f} MB, {conversations:,} conversations, "
          f"{turns:,} user turns in {time.perf_counter() - start:.1f} s")
    try:
        result = subprocess.run([sys.executable, __file__, "--load", str(path)],
                                check=True, capture_output=True, text=True)
        m = json.loads(result.stdout)
        print(f"loaded {m['requests']:,} requests in {m['seconds']:.1f} s: "
              f"{size / 1e6 / m['seconds']:.1f} MB/s, {m['requests'] / m['seconds']:,.0f} "
              "requests/s")
        print(f"peak RSS {m['peak_rss_mib']:.1f} MiB (after imports, before loading: "
              f"{m['rss_before_mib']:.1f} MiB) for a {size / 2**20:.1f} MiB file: "
              f"{m['peak_rss_mib'] / (size / 2**20):.1%} of the file size")
        print(f"median K {m['median_k']:,.0f} tokens (heuristic counts)")
    finally:
        if args.keep:
            print(f"kept {path}")
        else:
            os.remove(path)
            os.rmdir(folder)


if __name__ == "__main__":
    main()
