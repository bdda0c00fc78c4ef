"""Held-out metrics of a run's last checkpoint at any eval memory length (causal LM).

Transformer-XL evaluates with a longer memory than it trained with; this re-runs the trainer's
own eval (`loop.evaluate`: the held-out streams from their start, a fresh memory carried from
segment to segment) on a finished workdir with ``model.recurrence.eval_mem_len`` replaced, and
writes nothing.
"""

import dataclasses

import jax

from bert_jax.errors import UserInputError
from bert_jax.models.recurrence_options import with_recurrence
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.tasks import registry
from bert_jax.train import loop, setup
from bert_jax.train.checkpointing import Checkpointer
from bert_jax.train.settings import RunSettings


def held_out_metrics(settings: RunSettings, workdir: str, eval_mem_lens, data=None) -> dict:
  """{eval memory length: eval metrics} of the newest checkpoint in ``workdir``.

  Args:
    settings: the run's settings (``data.objective='clm'``).
    workdir: a workdir holding at least one checkpoint of that run.
    eval_mem_lens: memory lengths to evaluate with (0 = no memory).
    data: the run's data object, if already built.

  Raises:
    UserInputError: not a causal LM, a negative length, or no checkpoint.
  """
  mesh = mesh_lib.make_mesh(settings.mesh)
  data = registry.make_data(settings.task_settings) if data is None else data
  results = {}
  for eval_mem_len in eval_mem_lens:
    if eval_mem_len < 0:
      raise UserInputError(f"eval memory length {eval_mem_len} must be >= 0 (0 = no memory)")
    model = with_recurrence(settings.model, eval_mem_len=eval_mem_len)
    run = dataclasses.replace(settings, model=model)
    with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
      training = setup.build_training(run, mesh, data)
      if training.checkpoint_record is None:
        raise UserInputError("eval memory lengths apply to data.objective='clm' runs only")
      checkpointer = Checkpointer(workdir, record=training.checkpoint_record)
      try:
        step = checkpointer.latest_step()
        if step is None:
          raise UserInputError(f"{workdir} holds no checkpoint to evaluate; train it first")
        rng = jax.device_put(jax.random.key(settings.trainer.seed), sharding.replicated(mesh))
        state, _, _ = checkpointer.restore(step, training.abstract_state, rng)
      finally:
        checkpointer.close()
      eval_rng = jax.device_put(
        jax.random.key(settings.trainer.seed + 1), sharding.replicated(mesh)
      )
      batches = data.batches(
        split="eval",
        seed=settings.trainer.seed,
        global_batch_size=settings.trainer.global_batch_size,
        process_index=jax.process_index(),
        process_count=jax.process_count(),
      )
      results[eval_mem_len] = loop.evaluate(
        training.eval_step,
        state.params,
        batches,
        mesh,
        eval_rng,
        training.task,
        training.init_eval_memory,
      )
  return results
