"""Held-out loss of a tiny Transformer-XL LM as a function of its memory length.

  python -m bert_jax.bench.memory_length --family=xlnet --mem_lens=0,16,32 --segment_len=16 \
      --steps=800

  python -m bert_jax.bench.memory_length --config=configs/transformer_xl_tiny.py \
      --workdir=/tmp/transformer_xl_tiny --eval_mem_lens=0,32,64

With ``--config`` (a ``data.objective='clm'`` config) the run goes through the real trainer:
`train_and_evaluate` trains it in ``--workdir`` (or resumes / finds it finished), then the
trainer's eval re-reads the held-out streams of its last checkpoint once per
``--eval_mem_lens`` entry (`train/memory_eval.py`). One JSON line: {"config", "steps",
"mem_len", "segment_len", "held_out_loss": {eval memory length: nats per token},
"perplexity": {...}, "seconds"}.

Without ``--config``, a standalone byte-level experiment:
For each ``mem_len`` a causal LM of ``--family`` (a family with segment memory; model.causal,
L=2, H=64) is trained from the same
seed on the bytes of the embedded corpus, every batch row a stream of consecutive segments
(`data/segment_stream.py`) with the memory carried from one segment to the next and reset at
document boundaries; then it is evaluated on held-out documents the same way, with
``--eval_mem_len`` (default: the training memory). One JSON line per memory length:
{"family", "mem_len", "eval_mem_len", "segment_len", "steps", "held_out_loss" (nats per byte),
"seconds"}. A byte LM learns local structure within a few hundred steps, and a segment's
first bytes can only be predicted from the previous segment's.
"""

import dataclasses
import functools
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import flags
from ml_collections import config_flags

from bert_jax import names
from bert_jax.cli import runner
from bert_jax.data import default_corpus, text_corpus
from bert_jax.data.segment_stream import SegmentStream
from bert_jax.data.tokenized_corpus import TokenizedDocuments
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.models.recurrence_options import with_recurrence
from bert_jax.train import memory_eval
from bert_jax.train.loop import train_and_evaluate
from bert_jax.train.settings import settings_from_config

# The experiment's model but its family, chosen as a config chooses it (the registry builds it).
BYTE_LM = families.model_config_from_dict(
  dict(
    causal=True,
    vocab_size=256,
    hidden_size=64,
    num_layers=2,
    num_heads=2,
    intermediate_size=128,
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
  )
)
_TRAIN_DOCUMENTS, _HELD_OUT_DOCUMENTS = 12, 4
# The families the registry gives a causal LM with segment memory.
_MEMORY_FAMILIES = tuple(f for f in names.FAMILIES if families.get(f).has_memory)


def byte_streams(rows: int, segment_len: int):
  """(train, held-out) `SegmentStream`s of the embedded corpus's bytes (one token per byte)."""
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())

  def as_bytes(docs):
    return TokenizedDocuments.from_id_lists(
      [[np.frombuffer(" ".join(d).encode(), np.uint8).astype(np.int32)] for d in docs]
    )

  return (
    SegmentStream.from_documents(as_bytes(documents[:_TRAIN_DOCUMENTS]), rows, segment_len),
    SegmentStream.from_documents(as_bytes(documents[-_HELD_OUT_DOCUMENTS:]), rows, segment_len),
  )


def _loss_and_memory(params, batch, memory, memory_ids, config):
  out = (
    families.get(config.family)
    .causal_lm_model(config)
    .apply(
      {"params": params},
      batch["input_ids"],
      jnp.zeros_like(batch["input_ids"]),
      batch["document_ids"],
      memory,
      memory_ids_BN=memory_ids,
    )
  )
  ce_BL = optax.softmax_cross_entropy_with_integer_labels(out["logits"], batch["labels"])
  weights_BL = batch["label_weights"]
  loss = jnp.sum(ce_BL * weights_BL) / jnp.maximum(jnp.sum(weights_BL), 1.0)
  if config.recurrence.mem_len == 0:  # No recurrence: every segment starts without memory.
    return loss, (None, None)
  return loss, (out["memory"], out["memory_ids"])


def _empty_memory(config: ModelConfig, rows: int):
  """The first segment's memory: zeros of document 0, which no token attends to."""
  if config.recurrence.mem_len == 0:
    return None, None
  shape = (rows, config.recurrence.mem_len, config.hidden_size)
  return [jnp.zeros(shape)] * config.num_layers, jnp.zeros(shape[:2], jnp.int32)


def held_out_loss(
  family,
  mem_len,
  *,
  eval_mem_len=None,
  rows=8,
  segment_len=16,
  steps=800,
  eval_segments=64,
  lr=1e-3,
):
  """Trains the byte LM of ``family`` with ``mem_len``; returns its mean held-out loss (nats
  per byte)."""
  if family not in _MEMORY_FAMILIES:
    raise UserInputError(
      f"the byte LM needs --family, one with segment memory: "
      f"{' or '.join(_MEMORY_FAMILIES)} (got {family!r}); or pass --config with a "
      "data.objective='clm' config"
    )
  if mem_len < 0 or (eval_mem_len is not None and eval_mem_len < 0):
    raise UserInputError(f"memory lengths must be >= 0, got {mem_len} and {eval_mem_len}")
  config = with_recurrence(dataclasses.replace(BYTE_LM, family=family), mem_len=mem_len)
  eval_config = with_recurrence(config, mem_len=mem_len if eval_mem_len is None else eval_mem_len)
  train, held_out = byte_streams(rows, segment_len)
  first = jax.tree.map(jnp.asarray, train.batch(0))
  params = jax.jit(families.get(config.family).causal_lm_model(config).init)(
    jax.random.key(0), first["input_ids"], first["input_ids"] * 0, first["document_ids"]
  )["params"]
  optimizer = optax.adam(lr)
  opt_state = optimizer.init(params)
  grad_fn = jax.value_and_grad(functools.partial(_loss_and_memory, config=config), has_aux=True)

  @jax.jit
  def step(params, opt_state, batch, memory, memory_ids):
    (_, carried), grads = grad_fn(params, batch, memory, memory_ids)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, carried

  memory, memory_ids = _empty_memory(config, rows)
  for t in range(steps):
    params, opt_state, (memory, memory_ids) = step(
      params, opt_state, train.batch(t), memory, memory_ids
    )
  evaluate = jax.jit(functools.partial(_loss_and_memory, config=eval_config))
  losses, (memory, memory_ids) = [], _empty_memory(eval_config, rows)
  for t in range(min(eval_segments, held_out.segments_per_epoch)):
    loss, (memory, memory_ids) = evaluate(params, held_out.batch(t), memory, memory_ids)
    losses.append(float(loss))
  return float(np.mean(losses))


def _define_flags(values: flags.FlagValues, argv):
  define = {"flag_values": values}
  config_flags.DEFINE_config_file(
    "config",
    None,
    "A data.objective='clm' config: train it with the trainer.",
    **define,
    lock_config=True,
    sys_argv=argv,
  )
  flags.DEFINE_string("workdir", None, "With --config: the run's workdir.", **define)
  flags.DEFINE_list(
    "eval_mem_lens", ["0"], "With --config: eval memory lengths (0 = none).", **define
  )
  flags.DEFINE_string(
    "family",
    None,
    "Without --config: the family of the byte LM, one with segment memory "
    f"({', '.join(_MEMORY_FAMILIES)}).",
    **define,
  )
  flags.DEFINE_list("mem_lens", ["0", "16"], "Training memory lengths to compare.", **define)
  flags.DEFINE_integer(
    "eval_mem_len", None, "Memory at evaluation (default: training's).", **define
  )
  flags.DEFINE_integer("segment_len", 16, "Tokens (bytes) per segment.", **define)
  flags.DEFINE_integer("steps", 800, "Training steps (segments per row).", **define)
  flags.DEFINE_integer("rows", 8, "Batch rows (streams).", **define)


def _run_config(values: flags.FlagValues):
  """The --config mode: train with the trainer, then evaluate at each memory length."""
  if not values.workdir:
    raise UserInputError("--config needs --workdir (where the run trains or already is)")
  start = time.perf_counter()
  settings = settings_from_config(values.config, values.workdir)
  train_and_evaluate(values.config, values.workdir)
  results = memory_eval.held_out_metrics(
    settings, values.workdir, [int(m) for m in values.eval_mem_lens]
  )
  record = {
    "config": config_flags.get_config_filename(values["config"]),
    "steps": settings.trainer.num_train_steps,
    "mem_len": settings.model.recurrence.mem_len,
    "segment_len": settings.data.max_seq_length,
    "held_out_loss": {str(m): round(r["loss"], 4) for m, r in results.items()},
    "perplexity": {str(m): round(r["perplexity"], 2) for m, r in results.items()},
    "seconds": round(time.perf_counter() - start, 1),
  }
  print(json.dumps(record), flush=True)


def _run(values: flags.FlagValues):
  if values.config is not None:
    return _run_config(values)
  for mem_len in (int(m) for m in values.mem_lens):
    start = time.perf_counter()
    loss = held_out_loss(
      values.family,
      mem_len,
      eval_mem_len=values.eval_mem_len,
      rows=values.rows,
      segment_len=values.segment_len,
      steps=values.steps,
    )
    record = {
      "family": values.family,
      "mem_len": mem_len,
      "eval_mem_len": mem_len if values.eval_mem_len is None else values.eval_mem_len,
      "segment_len": values.segment_len,
      "steps": values.steps,
      "held_out_loss": round(loss, 4),
      "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(record), flush=True)


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  argv = sys.argv if argv is None else list(argv)
  return runner.run(__doc__, lambda values: _define_flags(values, argv), _run, argv)


if __name__ == "__main__":
  raise SystemExit(main())
