"""The trainer refuses a data object that lacks what it asks of the task's data
(`tasks.interface.check_data`), and the package's data objects provide it."""

import types

import numpy as np
import pytest

from bert_jax.data.parallel_pairs import PairsData
from bert_jax.data.pretraining_pipeline import PretrainingData
from bert_jax.data.segment_batches import SegmentData
from bert_jax.tasks import interface
from bert_jax.tasks.feature_batches import FeatureData
from bert_jax.tasks.multitask.data import MultitaskData

PREDICTING = types.SimpleNamespace(predicts=True)
NOT_PREDICTING = types.SimpleNamespace(predicts=False)


class _Scores(FeatureData):
  def eval_metrics(self, predictions):
    return {"accuracy": float(np.mean(predictions["label"] == self.eval_arrays["label"]))}


def _arrays(rows):
  return {"label": np.arange(rows, dtype=np.int32)}


def test_feature_data_is_predicting_data():
  data = _Scores(_arrays(4), _arrays(2))
  interface.check_data(PREDICTING, data)
  assert data.num_train_examples == 4 and data.test_arrays is None
  assert data.evaluate({"label": np.array([0, 0])}) == ({"accuracy": 0.5}, {})


@pytest.mark.parametrize("cls", [PretrainingData, SegmentData, PairsData, MultitaskData, _Scores])
def test_every_data_class_batches(cls):
  assert callable(cls.batches)


def test_multitask_data_has_every_predicting_method():
  for name in ("evaluate", "test_prediction_files", "num_train_examples"):
    assert hasattr(MultitaskData, name), name


class _BatchesOnly:
  def batches(self, **kwargs):
    return iter(())


def test_data_without_predictions_serves_a_task_without_them():
  interface.check_data(NOT_PREDICTING, _BatchesOnly())


def test_a_predicting_task_refuses_data_that_cannot_score_naming_what_is_missing():
  with pytest.raises(TypeError) as refused:
    interface.check_data(PREDICTING, _BatchesOnly())
  assert str(refused.value) == (
    "_BatchesOnly is not a PredictingData (tasks/interface.py): it has no num_train_examples, "
    "test_arrays, evaluate, test_prediction_files"
  )


def test_an_object_without_batches_is_refused():
  with pytest.raises(TypeError, match="is not a TaskData .* it has no batches"):
    interface.check_data(NOT_PREDICTING, object())
