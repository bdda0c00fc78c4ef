"""``init_from`` takes another run's parameters (not its optimizer state, step or data)."""

import pytest

from bert_jax.errors import UserInputError
from bert_jax.train.loop import train_and_evaluate
from tests import helpers, run_helpers


def _config(directory, **overrides):
  """A short run on `run_helpers.small_corpus` (written into ``directory``): the parameters
  matter here, not the data."""
  values = {
    "num_train_steps": 2,
    "checkpoint_every_steps": 2,
    "eval_every_steps": 100,
    "data.num_eval_examples": 16,
    **run_helpers.small_corpus_keys(directory),
  }
  values.update(overrides)
  return helpers.small_config(**values)


def test_init_from_restores_params_and_refuses_another_shape(tmp_path):
  train_and_evaluate(_config(tmp_path), str(tmp_path / "source"), helpers.one_device())
  # The first update of the new run has learning rate 0 (warmup), so its params after step 1
  # are exactly the restored ones.
  train_and_evaluate(
    _config(
      tmp_path,
      num_train_steps=1,
      checkpoint_every_steps=1,
      init_from=str(tmp_path / "source"),
      **{"optimizer.warmup_steps": 5},
    ),
    str(tmp_path / "target"),
    helpers.one_device(),
  )
  source = run_helpers.restore_params(tmp_path / "source", 2)
  target = run_helpers.restore_params(tmp_path / "target", 1)
  assert source.keys() == target.keys()
  for name in source:
    assert (source[name] == target[name]).all(), name

  wider = _config(
    tmp_path,
    init_from=str(tmp_path / "source"),
    **{"model.hidden_size": 64, "model.intermediate_size": 256},
  )
  with pytest.raises(UserInputError, match="parameters of another shape"):
    train_and_evaluate(wider, str(tmp_path / "wider"), helpers.one_device())
  with pytest.raises(UserInputError, match="holds no checkpoint"):
    train_and_evaluate(
      _config(tmp_path, init_from=str(tmp_path / "nowhere")),
      str(tmp_path / "x"),
      helpers.one_device(),
    )
