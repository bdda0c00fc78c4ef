"""XLM's objectives on parallel pairs: the TSV pipeline (layout, resume, host shards), the
trainer's MLM / CLM / TLM choices, and TLM reading the translation of a masked word."""

import importlib.util
import json
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.errors import UserInputError
from bert_jax.tasks import registry
from bert_jax.tools import synthetic_pairs
from bert_jax.train.loop import train_and_evaluate
from bert_jax.train.settings import settings_from_config
from tests import helpers, run_helpers

WORDS = 20  # Per language: chance accuracy on a masked word is 1/20.


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = tmp_path_factory.mktemp("pairs")
  translation = synthetic_pairs.write_corpus(
    str(root), pairs=2000, words=WORDS, min_length=4, max_length=8, seed=0
  )
  return root, translation


def _config(corpus_dir, **overrides):
  """configs/xlm_tlm_tiny.py on ``corpus_dir``, with ``overrides`` (dotted keys)."""
  path = run_helpers.REPO / "configs" / "xlm_tlm_tiny.py"
  spec = importlib.util.spec_from_file_location("xlm_tlm_tiny_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config(str(corpus_dir))
  config.update_from_flattened_dict(overrides)
  return config


def _settings(corpus_dir, tmp_path, **overrides):
  return settings_from_config(_config(corpus_dir, **overrides), str(tmp_path / "run"))


def test_tlm_examples_restart_positions_carry_languages_and_mask_both_sentences(corpus, tmp_path):
  root, _ = corpus
  data = registry.make_data(_settings(root, tmp_path).task_settings)
  special = data.tokenizer.special_ids
  batch = next(data.batches(split="train", seed=0, global_batch_size=64))
  for row in range(64):
    real = batch["input_mask"][row] == 1
    starts = np.flatnonzero(batch["position_ids"][row] == 0)[:2]
    assert starts[0] == 0 and 6 <= starts[1] <= 10  # [CLS] + 4..8 words + [SEP].
    languages = batch["language_ids"][row][real]
    assert set(languages[: starts[1]]) | set(languages[starts[1] :]) == {0, 1}
    assert len(set(languages[: starts[1]])) == len(set(languages[starts[1] :])) == 1
    assert batch["input_ids"][row][starts[1]] == special.cls
  # Over the batch, both sentences have masked words.
  weights = batch["masked_lm_weights"] > 0
  second = batch["masked_lm_positions"] >= 6
  assert (weights & second).sum() > 20 and (weights & ~second).sum() > 20


def test_batches_resume_by_position_and_shard_by_host(corpus, tmp_path):
  root, _ = corpus
  data = registry.make_data(_settings(root, tmp_path).task_settings)
  whole = data.batches(split="train", seed=3, global_batch_size=8)
  batches = [next(whole) for _ in range(4)]
  assert whole.position == 32
  resumed = data.batches(split="train", seed=3, global_batch_size=8, start_position=16)
  for key, value in next(resumed).items():
    np.testing.assert_array_equal(value, batches[2][key], err_msg=key)
  hosts = [
    next(data.batches(split="train", seed=3, global_batch_size=8, process_index=p, process_count=2))
    for p in range(2)
  ]
  for key, value in batches[0].items():
    np.testing.assert_array_equal(np.concatenate([h[key] for h in hosts]), value, err_msg=key)
  other_seed = next(data.batches(split="train", seed=4, global_batch_size=8))
  assert not np.array_equal(other_seed["input_ids"], batches[0]["input_ids"])


def test_clm_predicts_the_next_token_of_single_sentences(corpus, tmp_path):
  root, _ = corpus
  settings = _settings(root, tmp_path, **{"data.objective": "clm", "model.causal": True})
  data = registry.make_data(settings.task_settings)
  batch = next(data.batches(split="train", seed=0, global_batch_size=4))
  ids, weights = batch["input_ids"], batch["masked_lm_weights"]
  assert batch["masked_lm_positions"].shape == ids.shape and set(batch["language_ids"][0]) <= {0, 1}
  np.testing.assert_array_equal(
    batch["masked_lm_ids"][:, :-1] * (weights[:, :-1] > 0), ids[:, 1:] * (weights[:, :-1] > 0)
  )
  np.testing.assert_array_equal(weights.sum(1), batch["input_mask"].sum(1) - 1)
  assert (ids == data.tokenizer.special_ids.mask).sum() == 0  # Nothing masked.


@pytest.mark.parametrize(
  "overrides,expected",
  [
    ({"data.objective": "clm"}, "set model.causal=True"),
    ({"data.objective": "nsp"}, "trains none (MLM), clm or tlm"),
    (
      {"data.objective": "clm", "model.causal": True, "model.attention_dropout_rate": 0.1},
      "set model.attention_dropout_rate=0.0",
    ),
    ({"model.family": "bert", "model.intermediate_size": 256}, "are XLM's"),
    ({"data.pair_languages": ("a", "c")}, "'c' is not one of model.xlm.languages"),
  ],
)
def test_bad_objective_settings_fail_with_one_line(corpus, tmp_path, overrides, expected):
  root, _ = corpus
  with pytest.raises(UserInputError, match=re.escape(expected)):
    settings = _settings(root, tmp_path, **overrides)
    registry.make_task(settings.task_settings)
    registry.make_data(settings.task_settings)


def test_the_trainer_trains_clm(corpus, tmp_path):
  """data.objective=clm on the one trainer: finite metrics, a checkpoint, the CLM names."""
  root, _ = corpus
  overrides = {
    "data.objective": "clm",
    "model.causal": True,
    "num_train_steps": 2,
    "global_batch_size": 8,
    "log_every_steps": 2,
    "eval_every_steps": 2,
    "checkpoint_every_steps": 2,
    "data.num_eval_examples": 16,
  }
  metrics = train_and_evaluate(
    _config(root, **overrides), str(tmp_path / "clm"), helpers.one_device()
  )
  assert np.isfinite(metrics["clm_loss"]) and 0 <= metrics["clm_accuracy"] <= 1
  stored = json.loads((tmp_path / "clm" / "config.json").read_text())
  assert stored["model"]["xlm"]["languages"] == ["a", "b"] and stored["model"]["causal"]


def _train(settings, steps, seed=0):
  """``steps`` Adam steps of the task's own loss on its data; returns the params."""
  task, data = (
    registry.make_task(settings.task_settings),
    registry.make_data(settings.task_settings),
  )
  model = task.model(deterministic=True)
  example = task.model_inputs({k: jnp.asarray(v) for k, v in task.example_batch(1).items()})
  params = nn.unbox(jax.jit(model.init)(jax.random.key(seed), *example)["params"])
  optimizer = optax.adam(3e-3)

  @jax.jit
  def step(params, opt_state, batch):
    def loss_fn(p):
      outputs = model.apply({"params": p}, *task.model_inputs(batch))
      return task.loss_and_sums(outputs, batch, task.denominators(batch))[0]

    grads = jax.grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state

  opt_state = optimizer.init(params)
  batches = data.batches(split="train", seed=seed, global_batch_size=64)
  for _ in range(steps):
    params, opt_state = step(params, opt_state, next(batches))
  return model, params


def _probe(data, rng):
  """TLM inputs of the held-out pairs, both orders, with one word of the first sentence
  masked and its translation in the second intact: (inputs, positions [N, 1], targets [N])."""
  rows = [data.example(int(p), which) for p in data.eval_pairs for which in (0, 1)]
  batch = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
  first_len = np.argmax(batch["position_ids"][:, 1:] == 0, axis=1) + 1  # [CLS] a [SEP]
  positions = 1 + rng.integers(0, first_len - 2)
  rows_n = np.arange(len(rows))
  targets = batch["input_ids"][rows_n, positions].copy()
  batch["input_ids"][rows_n, positions] = data.tokenizer.special_ids.mask
  return batch, positions[:, None].astype(np.int32), targets


@pytest.mark.optimized_xla
def test_tlm_recovers_a_masked_word_from_its_translation_and_mlm_cannot(corpus, tmp_path):
  """Words are uniform given their own sentence: only the aligned translation names them.

  Measured on the held-out probe after 200 steps: TLM 0.975 (0.59 at 150, 1.0 at 250), MLM
  0.035 (chance 0.05) at every step from 25 to 250."""
  root, _ = corpus
  accuracy = {}
  probe_data = registry.make_data(_settings(root, tmp_path).task_settings)
  batch, positions, targets = _probe(probe_data, np.random.default_rng(0))
  for objective in ("tlm", "none"):
    model, params = _train(_settings(root, tmp_path, **{"data.objective": objective}), steps=200)
    logits = jax.jit(model.apply)(  # One compile instead of each op's own.
      {"params": params},
      batch["input_ids"],
      None,
      batch["input_mask"],
      positions,
      batch["position_ids"],
      batch["language_ids"],
    )["mlm_logits"]
    accuracy[objective] = float(np.mean(np.argmax(logits[:, 0], -1) == targets))
  print(f"masked-word accuracy with the translation in view: {accuracy}")
  assert accuracy["tlm"] > 0.6 and accuracy["none"] < 0.2, accuracy
