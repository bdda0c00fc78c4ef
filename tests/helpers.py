"""Shared test fixtures: small configs and synthetic batches with the pipeline's schema."""

import ast
import concurrent.futures
import pathlib

import jax
import numpy as np

from bert_jax.data import default_corpus, sentence_pairs, text_corpus, tokenized_corpus
from bert_jax.default_config import base_config
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.train import setup
from bert_jax.train.settings import settings_from_config


def one_device():
  """The devices a learning run trains on: the first CPU device alone. Its steps run 3-4x
  faster than on a mesh of all 8 fake devices, which share this host's cores; sharded ==
  single-device equivalence is tested by the step tests."""
  return jax.devices()[:1]


def small_config(**overrides):
  """A 2-layer, 4-head BERT small enough for CPU tests, shardable 8 ways."""
  config = base_config()
  config.num_train_steps = 20
  config.global_batch_size = 8
  config.log_every_steps = 2
  config.eval_every_steps = 10
  config.checkpoint_every_steps = 10
  config.model.size = "tiny"
  config.model.num_heads = 4
  config.model.vocab_size = 8192
  config.model.max_position_embeddings = 64
  config.data.max_seq_length = 32
  config.data.max_predictions_per_seq = 5
  config.optimizer.learning_rate = 1e-3
  config.optimizer.warmup_steps = 2
  for key, value in overrides.items():
    node = config
    *parents, leaf = key.split(".")
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  return config


def real_sentence_pairs(tokenizer, *, count, max_seq_length, short_seq_prob):
  """``count`` real [CLS] A [SEP] B [SEP] id rows from the embedded corpus (numpy int32)."""
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())
  corpus = tokenized_corpus.tokenize_documents(documents, tokenizer)
  parts, seed = [], 0
  while sum(len(p) for p in parts) < count:
    parts.append(
      sentence_pairs.create_sentence_pairs(
        corpus,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        rng=np.random.default_rng(seed),
        special_ids=tokenizer.special_ids,
      )["input_ids"]
    )
    seed += 1
  return np.concatenate(parts)[:count]


def one_train_step(config, devices):
  """One real train step of ``config`` on a mesh over ``devices``, from a fixed init.

  The init is the task's (with distillation's student initialisation from the teacher).

  Returns:
    (params before, params after, metrics, the set of param PartitionSpecs), on the host.
  """
  settings = settings_from_config(config)
  mesh = mesh_lib.make_mesh(settings.mesh, devices=devices)
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh)
    state = setup.fresh_state(training)
    if training.init_overlay is not None:  # Distillation: the student from its teacher.
      state = state.replace(params=training.init_overlay(state.params))
    init_params = jax.device_get(state.params)
    batch = sharding.host_batch_to_global(training.task.random_batch(8), mesh)
    rng = jax.device_put(jax.random.key(1), sharding.replicated(mesh))
    state, metrics = training.train_step(state, batch, rng)
    specs = {s.spec for s in jax.tree.leaves(training.state_shardings.params)}
    return init_params, jax.device_get(state.params), jax.device_get(metrics), specs


BATCH_KEYS = (
  "input_ids",
  "token_type_ids",
  "input_mask",
  "masked_lm_positions",
  "masked_lm_ids",
  "masked_lm_weights",
  "next_sentence_labels",
)


def assert_same_batches(left, right):
  """Two lists of pipeline batches are equal, key by key."""
  assert len(left) == len(right)
  for a, b in zip(left, right):
    for key in BATCH_KEYS:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def parse_python(path):
  """``ast.parse`` of a source file.

  CPython 3.11.7's parser can raise "SystemError: AST constructor recursion depth mismatch" in
  a thread whose recursion bookkeeping an earlier test disturbed (seen once in a full xdist
  run); a fresh thread parses the same source cleanly, so retry there.
  """
  return parse_source(pathlib.Path(path).read_text(encoding="utf-8"))


def parse_source(source: str):
  """``ast.parse`` of source text, retried in a fresh thread as `parse_python` says."""
  try:
    return ast.parse(source)
  except SystemError:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
      return pool.submit(ast.parse, source).result()
