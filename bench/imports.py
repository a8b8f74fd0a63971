"""What a user waits for before anything runs: ``archmax help`` and importing the host API.

``python -m bench.imports [--runs N]`` times each as a whole fresh process (N runs, min and
median) beside what the same entry point cost when everything was imported eagerly (the
whole CLI with its commands; the host API with the case runner, as ``from client import
create_agent`` once loaded), and prints the ratios. Targets: help under 0.3 s, the host
import under 0.5 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

PROBES: list[tuple[str, list[str], list[str]]] = [
    (
        "archmax help",
        ["-m", "archmax_temporal", "help"],
        ["-c", "import archmax_temporal.client.cli.commands"],
    ),
    (
        "archmax --help",
        ["-m", "archmax_temporal", "--help"],
        ["-c", "import archmax_temporal.client.cli.commands"],
    ),
    (
        "from archmax_temporal import create_agent",
        ["-c", "from archmax_temporal import create_agent"],
        [
            "-c",
            "import archmax_temporal.client.host, archmax_temporal.client.testing.runner",
        ],
    ),
]


def _time(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, *argv],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    _time(["-c", "pass"], 2)  # warm the page cache
    floor = statistics.median(_time(["-c", "pass"], args.runs))
    print(f"bare interpreter: {floor * 1000:.0f} ms (median of {args.runs})")
    print(f"{'entry point':44} {'lazy min/med':>14} {'eager min/med':>15} {'eager/lazy':>10}")
    for name, lazy_argv, eager_argv in PROBES:
        lazy = _time(lazy_argv, args.runs)
        eager = _time(eager_argv, args.runs)
        ratio = statistics.median(eager) / statistics.median(lazy)
        print(
            f"{name:44} {min(lazy) * 1000:6.0f}/{statistics.median(lazy) * 1000:<6.0f}ms "
            f"{min(eager) * 1000:6.0f}/{statistics.median(eager) * 1000:<7.0f}ms {ratio:9.1f}x"
        )


if __name__ == "__main__":
    main()
