"""bench/step_timing: steps kept in flight overlap the host's dispatch with the device's work."""

import concurrent.futures
import time

import pytest

from bert_jax.bench import step_timing

HOST_S, DEVICE_S = 0.02, 0.05


def _simulated_device_runner(device):
  """A runner whose dispatch takes HOST_S of the host and queues DEVICE_S on a one-worker
  'device', which runs the queued updates one after another, as a GPU stream does."""

  def dispatch():
    time.sleep(HOST_S)  # Preparing the call: the device is not told of the step before this.
    return device.submit(time.sleep, DEVICE_S)

  return step_timing.Runner(dispatch, lambda future: future.result())


def test_in_flight_hides_the_dispatch_that_waited_steps_pay():
  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as device:
    timings = step_timing.alternate({"sim": _simulated_device_runner(device)}, steps=8, rounds=2)
  timed = timings["sim"]
  assert len(timed.waited) == len(timed.in_flight) == 8
  # Waited: host, then device, in turn. In flight: the device's time alone, as the host
  # prepares the next step while this one runs.
  assert timed.waited_median_s >= HOST_S + DEVICE_S
  assert DEVICE_S <= timed.in_flight_median_s < HOST_S + DEVICE_S - HOST_S / 2
  assert timed.waited_median_cpu_s < HOST_S  # Sleeping costs no CPU time.


def test_in_flight_waits_for_each_update_in_order():
  waited, dispatched = [], []

  def dispatch():
    dispatched.append(len(dispatched))
    return dispatched[-1]

  runner = step_timing.Runner(dispatch, waited.append)
  intervals = step_timing.in_flight_intervals(runner, 3)
  assert len(intervals) == 3 and all(interval >= 0 for interval in intervals)
  # Update k is waited for only after k + 1 was dispatched, and every one is waited for.
  assert dispatched == [0, 1, 2, 3, 4] and waited == [0, 1, 2, 3, 4]


def test_a_synchronous_update_is_timed_whole_in_flight_too():
  """A CPU framework runs the update inside its dispatch: every interval holds one update."""

  def dispatch():
    time.sleep(DEVICE_S)

  intervals = step_timing.in_flight_intervals(step_timing.Runner(dispatch, lambda _: None), 3)
  assert len(intervals) == 3 and min(intervals) >= DEVICE_S


def test_jax_runner_carries_the_state_over():
  jnp = pytest.importorskip("jax.numpy")

  def step(state, increment):
    return state + increment, {"state": state}

  runner = step_timing.jax_runner(step, jnp.zeros(()), jnp.ones(()))
  assert [float(runner.run_one()["state"]) for _ in range(3)] == [0.0, 1.0, 2.0]
