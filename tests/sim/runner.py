"""Run seeds of the replication simulation, in worker processes, and report what failed.

`python -m tests.sim --seeds 0:2000` runs a range; `python -m tests.sim --seed N` runs one seed
and prints its trace (a failing seed reproduces exactly: everything it does follows from the
seed). make test runs a few thousand seeds (tests/sim/test_simulation.py), make fault 100,000.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.sim.cluster import Scenario, Simulation, Violation

SHM = Path("/dev/shm")


@dataclass
class Outcome:
    seed: int
    failure: str | None = None  # the violation (or the error) that ended the run
    acked: int = 0
    trace: list[str] = field(default_factory=list)


@dataclass
class Summary:
    seeds: int
    seconds: float
    acked: int
    failures: list[Outcome]

    @property
    def seeds_per_second(self) -> float:
        return self.seeds / self.seconds if self.seconds else 0.0


def run_one(seed: int, scenario: Scenario | None = None, trace: bool = False) -> Outcome:
    root = Path(tempfile.mkdtemp(prefix=f"sim-{seed}-", dir=SHM if SHM.is_dir() else None))
    sim = Simulation(seed, root, scenario, trace=trace)
    try:
        stats = sim.run()
        return Outcome(seed, None, stats["acked"], sim.trace)
    except Violation as e:
        return Outcome(seed, str(e), len(sim.acked), sim.trace)
    except Exception as e:  # a crash of the code under test is a failure of the seed too
        return Outcome(seed, f"seed {seed}: {type(e).__name__}: {e}", len(sim.acked), sim.trace)


def _run_chunk(seeds: list[int], scenario: Scenario | None = None) -> list[Outcome]:
    return [run_one(s, scenario) for s in seeds]


def run_seeds(seeds: Iterable[int], workers: int = 2, stop_at_first: bool = False,
              scenario: Scenario | None = None) -> Summary:
    """Every seed; failures listed in seed order. Workers are forked (they inherit what the
    caller patched, which is how the tests show that the harness finds a race without its fix)."""
    todo = list(seeds)
    started = time.monotonic()
    outcomes: list[Outcome] = []
    if workers <= 1:
        for s in todo:
            outcomes.append(run_one(s, scenario))
            if stop_at_first and outcomes[-1].failure:
                break
    else:
        chunk = 25
        chunks = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for done in pool.map(_run_chunk, chunks, [scenario] * len(chunks)):
                outcomes.extend(done)
                if stop_at_first and any(o.failure for o in done):
                    break
    failures = sorted((o for o in outcomes if o.failure), key=lambda o: o.seed)
    return Summary(len(outcomes), time.monotonic() - started, sum(o.acked for o in outcomes), failures)
