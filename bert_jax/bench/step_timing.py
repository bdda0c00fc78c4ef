"""How the benchmarks time a train step: each step waited for, and steps kept in flight.

A `Runner` starts one update and returns a handle to wait on. Two timings come of it:

- **waited**: from a step's dispatch to its completion, the device idle until the next one is
  dispatched (the H200 table in docs/benchmarks.md was measured this way). It includes the host's dispatch: on an
  H200, about 5.4 ms of a BERT-base step's 52.8 ms went to jax preparing the call and launching
  its CUDA graph while the GPU waited (a trace of 2026-11-28).
- **in flight**: the trainer's way. `train/loop.py` dispatches step N + 1 before it reads step
  N's metrics, so the host prepares the next step while the device runs this one. The time is
  the interval between successive steps' completions with the next step already queued.

Both baselines and bert_jax are timed both ways, alternating between implementations in rounds
so that all see the same machine.
"""

import dataclasses
import statistics
import time
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Runner:
  """One implementation's update.

  Attributes:
    dispatch: starts one update (asynchronously where the framework allows) and returns a handle.
    wait: blocks until the update of a handle has finished on the device.
  """

  dispatch: Callable[[], object]
  wait: Callable[[object], None]

  def run_one(self):
    """One update, run to completion; returns its handle."""
    handle = self.dispatch()
    self.wait(handle)
    return handle


@dataclasses.dataclass(frozen=True)
class Clock:
  """Where the timings read the time: the process's by default; tests pass a simulated one.

  Attributes:
    wall: seconds on a monotonic wall clock.
    cpu: this process's CPU seconds.
  """

  wall: Callable[[], float] = time.perf_counter
  cpu: Callable[[], float] = time.process_time


SYSTEM_CLOCK = Clock()


def jax_runner(step, state, *args) -> Runner:
  """A `Runner` of ``state, metrics = step(state, *args)``; the state carries over."""
  import jax  # pylint: disable=g-import-not-at-top

  holder = {"state": state}

  def dispatch():
    holder["state"], metrics = step(holder["state"], *args)
    return metrics

  return Runner(dispatch, jax.block_until_ready)


def waited_times(
  runner: Runner, steps: int, clock: Clock = SYSTEM_CLOCK
) -> list[tuple[float, float]]:
  """[(wall seconds, process CPU seconds)] of ``steps`` updates, each run to completion."""
  times = []
  for _ in range(steps):
    start, start_cpu = clock.wall(), clock.cpu()
    runner.run_one()
    times.append((clock.wall() - start, clock.cpu() - start_cpu))
  return times


def median_waited_ms(call: Callable[[], object], repeats: int) -> float:
  """Median milliseconds of ``call()`` run to completion, after two warm-up calls (the first
  compiles); ``call`` returns jax arrays."""
  import jax  # pylint: disable=g-import-not-at-top

  runner = Runner(call, jax.block_until_ready)
  for _ in range(2):
    runner.run_one()
  return 1e3 * statistics.median(wall for wall, _ in waited_times(runner, repeats))


def in_flight_intervals(runner: Runner, steps: int, clock: Clock = SYSTEM_CLOCK) -> list[float]:
  """Wall seconds between the completions of successive updates, each dispatched before the
  previous one is waited for (as `train/loop.py` runs them): ``steps`` intervals.

  A completion is read after the next update was dispatched, never after the last one: a
  synchronous framework (a CPU) runs an update inside its dispatch, so each interval then
  holds one whole update too.
  """
  pending = runner.dispatch()
  completions = []
  for _ in range(steps + 1):
    following = runner.dispatch()
    runner.wait(pending)
    completions.append(clock.wall())
    pending = following
  runner.wait(pending)
  return [later - earlier for earlier, later in zip(completions, completions[1:])]


@dataclasses.dataclass
class Timings:
  """One implementation's timed updates.

  Attributes:
    waited: (wall, CPU) seconds of updates each run to completion.
    in_flight: wall seconds between completions of updates kept in flight.
  """

  waited: list = dataclasses.field(default_factory=list)
  in_flight: list = dataclasses.field(default_factory=list)

  @property
  def waited_median_s(self) -> float:
    return statistics.median(wall for wall, _ in self.waited)

  @property
  def waited_median_cpu_s(self) -> float:
    return statistics.median(cpu for _, cpu in self.waited)

  @property
  def in_flight_median_s(self) -> float:
    return statistics.median(self.in_flight)


def alternate(runners: dict, steps: int, rounds: int, clock: Clock = SYSTEM_CLOCK) -> dict:
  """Times each runner both ways after two warm-up updates each.

  Args:
    runners: name -> `Runner`.
    steps: updates per runner and way, split over the rounds.
    rounds: rounds; in each, every runner in turn runs its share waited, then in flight.
    clock: where the time is read.

  Returns:
    name -> `Timings`.
  """
  for runner in runners.values():
    runner.run_one()
    runner.run_one()
  per_round = max(steps // rounds, 1)
  timings = {name: Timings() for name in runners}
  for _ in range(rounds):
    for name, runner in runners.items():
      timings[name].waited += waited_times(runner, per_round, clock)
      timings[name].in_flight += in_flight_intervals(runner, per_round, clock)
  return timings
