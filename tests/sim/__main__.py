"""python -m tests.sim --seeds A:B [--workers N] | --seed N (prints the seed's trace)."""

from __future__ import annotations

import argparse
import sys

from tests.sim.runner import run_one, run_seeds


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--seeds", help="a range A:B of seeds to run")
    group.add_argument("--seed", type=int, help="one seed, with its trace")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.seed is not None:
        outcome = run_one(args.seed, trace=True)
        print("\n".join(outcome.trace))
        print(outcome.failure or f"seed {args.seed}: every invariant held ({outcome.acked} records acknowledged)")
        return 1 if outcome.failure else 0
    a, b = (int(x) for x in args.seeds.split(":"))
    summary = run_seeds(range(a, b), args.workers)
    for f in summary.failures:
        print(f.failure)
    print(f"{summary.seeds} seeds in {summary.seconds:.1f} s ({summary.seeds_per_second:.1f} seeds/s), "
          f"{summary.acked} records acknowledged, {len(summary.failures)} failed")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
