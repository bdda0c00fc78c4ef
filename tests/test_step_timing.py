"""bench/step_timing: steps kept in flight overlap the host's dispatch with the device's work."""

import pytest

from bert_jax.bench import step_timing

HOST_CPU_S = 0.001


class _SimulatedHostAndDevice:
  """A host and a one-stream device on a simulated clock, so the timings are exact on any
  machine. A dispatch costs the host ``host_s`` (``HOST_CPU_S`` of it CPU) before the device
  hears of the step, then queues ``device_s`` on the device, which runs queued updates one after
  another, as a GPU stream does; waiting moves the host's clock to the update's completion."""

  def __init__(self, host_s, device_s):
    self.host_s, self.device_s = host_s, device_s
    self.now = self.cpu = self.device_free = 0.0
    self.clock = step_timing.Clock(wall=lambda: self.now, cpu=lambda: self.cpu)

  def dispatch(self):
    self.now += self.host_s
    self.cpu += HOST_CPU_S
    self.device_free = max(self.device_free, self.now) + self.device_s
    return self.device_free

  def wait(self, completion):
    self.now = max(self.now, completion)


@pytest.mark.parametrize("host_s, device_s", [(0.02, 0.05), (0.05, 0.02)])
def test_in_flight_hides_the_dispatch_that_waited_steps_pay(host_s, device_s):
  simulated = _SimulatedHostAndDevice(host_s, device_s)
  runner = step_timing.Runner(simulated.dispatch, simulated.wait)
  timed = step_timing.alternate({"sim": runner}, steps=8, rounds=2, clock=simulated.clock)["sim"]
  assert len(timed.waited) == len(timed.in_flight) == 8
  # Waited: host, then device, in turn. In flight: the slower of the two alone, as the host
  # prepares the next step while this one runs.
  assert timed.waited_median_s == pytest.approx(host_s + device_s)
  assert timed.in_flight == pytest.approx([max(host_s, device_s)] * 8)
  assert timed.waited_median_cpu_s == pytest.approx(HOST_CPU_S)  # Waiting costs no CPU time.


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
  simulated = _SimulatedHostAndDevice(host_s=0.05, device_s=0.0)
  runner = step_timing.Runner(simulated.dispatch, lambda _: None)
  intervals = step_timing.in_flight_intervals(runner, 3, simulated.clock)
  assert intervals == pytest.approx([0.05] * 3)


def test_jax_runner_carries_the_state_over():
  jnp = pytest.importorskip("jax.numpy")

  def step(state, increment):
    return state + increment, {"state": state}

  runner = step_timing.jax_runner(step, jnp.zeros(()), jnp.ones(()))
  assert [float(runner.run_one()["state"]) for _ in range(3)] == [0.0, 1.0, 2.0]
