"""The train loop: `train_and_evaluate(config, workdir)`, shared by every task."""

import contextlib
import signal
import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np
from absl import logging
from etils import epath

from bert_jax import workdir as workdir_lib
from bert_jax.errors import NonFiniteLossError, UserInputError
from bert_jax.models.attention import kinds as attention_kinds
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.tasks import interface as task_interface
from bert_jax.tasks import registry
from bert_jax.train import compilation_cache, flops, profiling, run_lock, run_state, setup
from bert_jax.train import init_from as init_from_lib
from bert_jax.train.checkpointing import Checkpointer
from bert_jax.train.metrics_writer import MetricsWriter
from bert_jax.train.settings import (
  check_batch_fits_mesh,
  resolve_train_steps,
  settings_from_config,
)


class _SigtermFlag:
  """Turns SIGTERM (a Cloud TPU preemption notice) into a flag the loop checks every step."""

  def __init__(self):
    self.raised = False
    self._previous = signal.signal(signal.SIGTERM, self._handle)

  def _handle(self, signum, frame):
    del signum, frame
    self.raised = True

  def restore(self):
    signal.signal(signal.SIGTERM, self._previous)


class _IntervalMetrics:
  """Sums one log interval's per-step metric sums on the host and times the interval.

  Steps are timed from the end of the run's first step, so compilation never counts as speed.
  """

  def __init__(self):
    self.sums, self.grad_norm_sum, self.steps = None, 0.0, 0
    self.timed_steps, self.start = 0, None

  def add(self, metrics):
    sums = {
      k: np.asarray(v, np.float64)
      for k, v in metrics.items()
      if k not in ("grad_norm", "learning_rate", "finite")
    }
    self.sums = sums if self.sums is None else {k: self.sums[k] + sums[k] for k in sums}
    self.grad_norm_sum += float(metrics["grad_norm"])
    self.learning_rate = float(metrics["learning_rate"])
    self.steps += 1
    if self.start is None:
      self.start = time.monotonic()
    else:
      self.timed_steps += 1

  def steps_per_sec(self):
    """None until a step after the first has finished."""
    if not self.timed_steps:
      return None
    return self.timed_steps / max(time.monotonic() - self.start, 1e-9)

  def reset(self):
    self.sums, self.grad_norm_sum, self.steps = None, 0.0, 0
    self.timed_steps, self.start = 0, time.monotonic()


def _batches(data, settings, split, start_position=0):
  return data.batches(
    split=split,
    seed=settings.trainer.seed,
    global_batch_size=settings.trainer.global_batch_size,
    process_index=jax.process_index(),
    process_count=jax.process_count(),
    start_position=start_position,
  )


def evaluate(eval_fn, params, eval_batches, mesh, rng, task, init_memory=None):
  """Metrics of the deterministic model over the whole (finite) eval split.

  With ``init_memory`` (a model with segment memory) ``eval_fn`` also takes and returns the
  memory, which starts empty and follows the eval streams from batch to batch.
  """
  totals = None
  memory = None if init_memory is None else init_memory()
  for host_batch in eval_batches:
    batch = sharding.host_batch_to_global(host_batch, mesh)
    if memory is None:
      sums = eval_fn(params, batch, rng)
    else:
      sums, memory = eval_fn(params, batch, memory, rng)
    sums = jax.device_get(sums)
    totals = sums if totals is None else jax.tree.map(np.add, totals, sums)
  if totals is None:
    raise UserInputError("the eval split is empty; add text or lower data.eval_fraction")
  return task.metrics_from_sums(totals)


def predict_rows(predict_fn, params, batches, mesh, rng):
  """Summed metrics and every real row's predictions over a finite split, ordered by row_id.

  Every host gets every row's predictions (the jitted step replicates them); padding rows
  (``row_id`` -1) are dropped.
  """
  totals, parts = None, []
  for host_batch in batches:
    sums, predictions = jax.device_get(
      predict_fn(params, sharding.host_batch_to_global(host_batch, mesh), rng)
    )
    totals = sums if totals is None else jax.tree.map(np.add, totals, sums)
    parts.append(predictions)
  if totals is None:
    raise UserInputError("the eval split is empty; check data.eval_path or data.tfds_eval_split")
  rows = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
  row_id = rows.pop("row_id")
  real = row_id >= 0
  order = np.argsort(row_id[real], kind="stable")
  if not np.array_equal(row_id[real][order], np.arange(order.size)):
    raise RuntimeError("batches did not cover every row exactly once")
  return totals, {key: value[real][order] for key, value in rows.items()}


def evaluate_predictions(
  predict_fn, params, eval_batches, mesh, rng, task, data: task_interface.PredictingData
):
  """Eval loss, the task's official metrics and its eval prediction files (`data.evaluate`)."""
  totals, rows = predict_rows(predict_fn, params, eval_batches, mesh, rng)
  metrics, files = data.evaluate(rows)
  return {**task.metrics_from_sums(totals), **metrics}, files


def write_predictions(workdir, files):
  """Writes {name: text} under ``<workdir>/predictions/``; process 0 only (rows are replicated)."""
  if jax.process_index() != 0 or not files:
    return
  for name, text in files.items():
    path = workdir_lib.Workdir.at(workdir).predictions / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: str, devices: Sequence[jax.Device] | None = None
) -> dict:
  """Trains (or resumes) the run described by ``config`` in ``workdir``.

  Args:
    config: the experiment config (see configs/).
    workdir: where config.json, checkpoints/, metrics.jsonl and tensorboard/ live.
    devices: the devices the mesh spans; default every device of every process. A subset
      lets one host run small runs side by side, each on its own devices.

  Returns:
    The last eval metrics.
  """
  # A refused run leaves its workdir byte-identical. config.json is the commit point: it is
  # written once every check has passed and the state is restored or initialised, and the
  # compilation cache opens after it. Before it, the only write to an existing workdir is the
  # lock (removed again); a workdir this run created holds nothing of an accepted run and is
  # removed.
  settings = settings_from_config(config, str(workdir))
  workdir = epath.Path(workdir)
  resolved = run_state.resolved_config(
    config, settings.model, workdir, getattr(settings.data, "lowercase", None)
  )
  run_state.check_workdir(workdir, resolved)
  new_workdir = not workdir.exists()
  lock = run_lock.acquire_for_run(workdir, settings.trainer.lock_lease_secs)
  try:
    return _train_and_evaluate(settings, resolved, workdir, lock, devices)
  finally:
    lock.release()
    run = workdir_lib.Workdir(workdir)
    if new_workdir and jax.process_index() == 0 and not run.config_json.exists():
      run.path.rmtree()


def _train_and_evaluate(settings, resolved, workdir, lock, devices):
  """`train_and_evaluate` once this run holds the workdir."""
  mesh = mesh_lib.make_mesh(settings.mesh, devices)
  check_batch_fits_mesh(
    settings.trainer, mesh.shape["data"] * mesh.shape["fsdp"], jax.process_count()
  )
  data = registry.make_data(settings.task_settings)
  settings = resolve_train_steps(
    settings, data.num_train_examples if settings.trainer.num_train_epochs else 0
  )
  trainer = settings.trainer
  logging.info(
    "task %s: %d train steps, %d warmup",
    trainer.task,
    trainer.num_train_steps,
    settings.optimizer.warmup_steps,
  )
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh, data)
    task_interface.check_data(training.task, data)
    # Before the Checkpointer creates checkpoints/: a refused init_from changes nothing.
    if trainer.init_from and not workdir_lib.Workdir(workdir).has_checkpoints():
      init_from_lib.check_fits(trainer.init_from, training.abstract_state.params, settings.model)
    checkpointer = Checkpointer(
      str(workdir), trainer.max_checkpoints_to_keep, record=training.checkpoint_record
    )
    state, rng, position = run_state.restore_or_initialize(
      checkpointer,
      training.init_params,
      training.optimizer,
      training.abstract_state,
      training.state_shardings,
      trainer.seed,
      sharding.replicated(mesh),
      trainer.init_from,
      settings.model,
      init_overlay=training.init_overlay,
      init_memory=training.init_memory,
    )
    # Last of the start: every refusal (the checkpoint's shapes, record or damage) came above.
    run_state.write_config_json(workdir, resolved)
    # Only an accepted run writes compiled programs into the workdir (the train and eval steps
    # compile below; the few small programs of the start are not cached).
    compilation_cache.configure(
      workdir, trainer.compilation_cache_dir, mesh.devices.flat[0].platform
    )
    return _run(settings, training, data, mesh, workdir, checkpointer, state, rng, position, lock)


def _packed_rows_hint(model) -> str:
  """The other cause of NaN with cuDNN attention: rows that hold several documents."""
  if not attention_kinds.get(model.attention_kind).masks_by_length:
    return ""
  return (
    f" (attention_kind={model.attention_kind!r} makes rows that hold several documents NaN: "
    "packed records need model.attention_kind='dense')"
  )


def _run(settings, training, data, mesh, workdir, checkpointer, state, rng, position, lock):
  """The step loop proper: dispatch step N+1 before reading step N's metrics."""
  trainer = settings.trainer
  task = training.task
  eval_rng = jax.device_put(jax.random.key(trainer.seed + 1), sharding.replicated(mesh))
  start_step = int(jax.device_get(state.step))
  writer = MetricsWriter(str(workdir), trainer.num_train_steps)
  example = task.example_batch(trainer.global_batch_size)
  flops_per_step = flops.train_flops_for_task(task, settings.model, example)
  peak = flops.total_peak_flops(trainer.peak_flops_per_device, mesh.devices.flat)
  tokens_per_step = example["input_ids"].size
  batches = _batches(data, settings, "train", start_position=position)
  sigterm = _SigtermFlag() if jax.process_count() == 1 else None
  interval = _IntervalMetrics()
  pending = []  # (step number after the update, device metrics)
  last_saved = start_step if start_step else None
  eval_metrics = {}
  profiler = profiling.StepProfiler(workdir, trainer.profile_start_step, trainer.profile_num_steps)

  def drain(keep: int):
    while len(pending) > keep:
      step, metrics = pending.pop(0)
      metrics = jax.device_get(metrics)
      if not bool(metrics["finite"]):
        raise NonFiniteLossError(
          f"loss or gradient is not finite at step {step}; the last good checkpoint is "
          f"{checkpointer.directory}/{last_saved}; lower optimizer.learning_rate or check "
          f"the data{_packed_rows_hint(settings.model)}"
        )
      interval.add(metrics)
      if step % trainer.log_every_steps == 0:
        row = task.metrics_from_sums(interval.sums)
        row.update(
          learning_rate=interval.learning_rate, grad_norm=interval.grad_norm_sum / interval.steps
        )
        steps_per_sec = interval.steps_per_sec()
        if steps_per_sec is not None:
          row.update(
            steps_per_sec=steps_per_sec,
            tokens_per_sec=steps_per_sec * tokens_per_step,
            mfu=steps_per_sec * flops_per_step / peak,
          )
        writer.write(step, "train", row)
        interval.reset()

  try:
    for step in range(start_step, trainer.num_train_steps):
      profiler.before_step(step)
      batch = sharding.host_batch_to_global(next(batches), mesh)
      state, metrics = training.train_step(state, batch, rng)
      profiler.after_step(step, metrics)
      pending.append((step + 1, metrics))
      drain(keep=1)
      checkpointer.check()  # A failed asynchronous save ends the run now, not at the next save.
      done = step + 1
      preempted = sigterm.raised if sigterm else checkpointer.reached_preemption(done)
      if done % trainer.checkpoint_every_steps == 0 or done == trainer.num_train_steps or preempted:
        drain(keep=0)  # Never checkpoint a state whose update was not finite.
        lock.check()  # Never write over a run that took the workdir over.
        checkpointer.save(done, state, rng, batches.position)
        last_saved = done
      if done % trainer.eval_every_steps == 0 or done == trainer.num_train_steps:
        drain(keep=0)
        eval_batches = _batches(data, settings, "eval")
        if training.predict_step is None:
          eval_metrics = evaluate(
            training.eval_step,
            state.params,
            eval_batches,
            mesh,
            eval_rng,
            task,
            training.init_eval_memory,
          )
        else:
          eval_metrics, files = evaluate_predictions(
            training.predict_step, state.params, eval_batches, mesh, eval_rng, task, data
          )
          if done == trainer.num_train_steps and data.test_arrays is not None:
            _, test_rows = predict_rows(
              training.predict_step, state.params, _batches(data, settings, "test"), mesh, eval_rng
            )
            files.update(data.test_prediction_files(test_rows))
          write_predictions(workdir, files)
        writer.write(done, "eval", eval_metrics)
      if preempted:
        logging.warning("Preempted (SIGTERM): saved step %d, exiting", done)
        break
    drain(keep=0)
  finally:
    # Every closer runs even if an earlier one raises, and the checkpointer closes last: a
    # failed asynchronous save (a full disk) is the error the run ends with, not the metrics
    # write that found the disk full after it.
    with contextlib.ExitStack() as closers:
      closers.callback(checkpointer.close)
      if sigterm:
        closers.callback(sigterm.restore)
      closers.callback(writer.close)
      closers.callback(profiler.close)
  return eval_metrics
