"""The trainer side of fine-tuning: settings (epochs, warmup fraction, data sections), the shared
feature batching, init_from's mismatch report, vocab resolution, FLOPs of task batches."""

import json

import numpy as np
import pytest

from bert_jax import names
from bert_jax.data import default_corpus
from bert_jax.default_config import finetune_config
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.tasks import feature_batches as finetune_batches
from bert_jax.tasks import registry
from bert_jax.tasks.classification.objective import ClassificationTask
from bert_jax.train import flops, init_from, settings
from tests import finetune_fixtures, helpers


def _settings(task="classification", **overrides):
  values = {"data.glue_task": "mrpc", "data.train_path": "train.tsv", "data.eval_path": "dev.tsv"}
  values.update(overrides)
  return settings.settings_from_config(finetune_fixtures.set_keys(finetune_config(task), values))


def test_epochs_and_warmup_fraction_become_steps():
  resolved = settings.resolve_train_steps(_settings(), num_train_examples=100)
  assert resolved.trainer.num_train_steps == 10  # ceil(3 epochs * 100 / 32).
  assert resolved.optimizer.warmup_steps == 1  # round(10% of 10).
  fixed = settings.resolve_train_steps(
    _settings(
      num_train_epochs=0.0,
      num_train_steps=500,
      warmup_fraction=0.0,
      **{"optimizer.warmup_steps": 7},
    ),
    num_train_examples=100,
  )
  assert (fixed.trainer.num_train_steps, fixed.optimizer.warmup_steps) == (500, 7)


@pytest.mark.parametrize(
  "overrides,message",
  [
    ({"data.masking": "token"}, r"unknown data config keys \['masking'\]"),
    ({"task": "summarization"}, "task='summarization' is unknown; choose one of pretraining"),
    ({"data.tfds_name": "glue/mrpc"}, "are both set; keep one of the two sources"),
    ({"data.train_path": ""}, "set data.train_path and data.eval_path"),
    ({"data.glue_task": "mrcp"}, "'mrcp' is not a GLUE task"),
    (
      {"freeze_encoder": True},
      ("freeze_encoder=True keeps the encoder as restored, but init_from is empty"),
    ),
    ({"warmup_fraction": 1.5}, r"warmup_fraction=1.5 in \[0, 1\)"),
  ],
  ids=["pretraining_key", "task", "two_sources", "no_files", "glue_task", "freeze", "warmup"],
)
def test_bad_finetune_settings(overrides, message):
  with pytest.raises(UserInputError, match=message):
    _settings(**overrides)


def test_pretraining_keeps_its_data_section_and_refuses_epochs():
  assert settings.settings_from_config(helpers.small_config()).data.max_predictions_per_seq == 5
  with pytest.raises(UserInputError, match="num_train_epochs is for fine-tuning tasks"):
    settings.settings_from_config(helpers.small_config(num_train_epochs=3.0))


@pytest.mark.parametrize(
  "arg", ["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "mnli_mismatched", "qnli", "rte", "wnli"]
)
def test_glue_configs_carry_the_paper_recipe(arg):
  config = finetune_fixtures.glue_config(arg, {"data.tfds_name": f"glue/{arg}"})
  run = settings.settings_from_config(config)
  assert run.trainer.task == "classification"
  assert run.data.glue_task == arg.replace("_mismatched", "")
  assert (
    run.trainer.global_batch_size,
    run.optimizer.learning_rate,
    run.trainer.num_train_epochs,
    run.trainer.warmup_fraction,
    run.data.max_seq_length,
  ) == (32, 2e-5, 3.0, 0.1, 128)
  expected_split = {"mnli": "validation_matched", "mnli_mismatched": "validation_mismatched"}
  assert run.data.tfds_eval_split == expected_split.get(arg, "validation")


def _take(batches, count):
  return [next(batches) for _ in range(count)]


def _data(num_rows=10):
  class Rows(finetune_batches.FeatureData):
    def eval_metrics(self, predictions):
      return {}

  arrays = {"x": np.arange(num_rows, dtype=np.int32) * 10}
  return Rows(arrays, dict(arrays))


def test_eval_batches_cover_every_row_once_and_pad_the_last():
  data = _data()
  one = list(data.batches("eval", 0, 4, 0, 1))
  assert len(one) == 3
  rows = np.concatenate([b["row_id"] for b in one])
  np.testing.assert_array_equal(rows, list(range(10)) + [-1, -1])
  np.testing.assert_array_equal(
    np.concatenate([b["example_weight"] for b in one]), [1.0] * 10 + [0.0] * 2
  )
  np.testing.assert_array_equal(
    np.concatenate([b["x"] for b in one]), list(range(0, 100, 10)) + [0, 0]
  )
  hosts = [list(data.batches("eval", 0, 4, p, 2)) for p in range(2)]
  for k, batch in enumerate(one):  # Host p holds rows [2p, 2p+2) of every global batch.
    for key in batch:
      np.testing.assert_array_equal(
        np.concatenate([hosts[0][k][key], hosts[1][k][key]]), batch[key]
      )


def test_train_batches_reshuffle_each_epoch_and_resume_exactly():
  data = _data()
  run = _take(data.batches("train", 3, 4, 0, 1), 10)
  rows = np.concatenate([b["row_id"] for b in run])
  for epoch in range(4):  # 40 rows = 4 epochs, each a permutation of the 10 features.
    assert sorted(rows[10 * epoch : 10 * epoch + 10]) == list(range(10))
  assert not np.array_equal(rows[:10], rows[10:20])
  np.testing.assert_array_equal(np.concatenate([b["x"] for b in run]), rows * 10)
  batches = data.batches("train", 3, 4, 0, 1)
  _take(batches, 6)
  resumed = data.batches("train", 3, 4, 0, 1, start_position=batches.position)
  for a, b in zip(_take(resumed, 4), run[6:]):
    np.testing.assert_array_equal(a["row_id"], b["row_id"])
  other_seed = np.concatenate([b["row_id"] for b in _take(data.batches("train", 4, 4, 0, 1), 3)])
  assert not np.array_equal(other_seed, rows[:12])


def test_mismatches_are_reported_together():
  stored = {
    "bert/embeddings/word_embeddings/embedding": (8192, 128),
    "bert/encoder/layer_0/output/kernel": (512, 128),
    "bert/encoder/layer_1/output/kernel": (512, 128),
    "classifier/kernel": (128, 3),
    "classifier/bias": (3,),
    "mlm_head/output_bias": (8192,),
  }
  wanted = {
    "bert/embeddings/word_embeddings/embedding": (30522, 128),
    "bert/encoder/layer_0/output/kernel": (256, 128),
    "classifier/kernel": (128, 2),
    "classifier/bias": (2,),
  }
  assert init_from.mismatch_problems(stored, wanted) == [
    (
      "the checkpoint has 8192 vocab entries, this model 30522 (model.vocab_size=30522): set "
      "model.vocab_size=8192 and data.vocab_path to the checkpoint's vocab"
    ),
    (
      "head 'classifier' has 3 labels in the checkpoint, 2 in this model: make the task's "
      "label count 3, or init from a checkpoint without this head (e.g. the pretraining run)"
    ),
    (
      "1 parameters of another shape (checkpoint vs model), e.g. "
      "bert/encoder/layer_0/output/kernel (512, 128) vs (256, 128): match the model.* keys"
    ),
    (
      "the checkpoint has 1 encoder parameters the model lacks, e.g. "
      "bert/encoder/layer_1/output/kernel: match model.num_layers / scan_layers / reversible"
    ),
  ]
  # New heads and left-out pretraining heads are no problem.
  assert (
    init_from.mismatch_problems(
      {"bert/encoder/layer_0/output/kernel": (512, 128), "nsp_head/kernel": (128, 2)},
      {"bert/encoder/layer_0/output/kernel": (512, 128), "tagger/kernel": (128, 9)},
    )
    == []
  )
  # A masked-LM-only checkpoint (no pooler) fits; the pooler starts fresh. An encoder layer
  # the checkpoint lacks does not.
  wanted = {"bert/encoder/layer_0/output/kernel": (512, 128), "bert/pooler/kernel": (128, 128)}
  assert (
    init_from.mismatch_problems({"bert/encoder/layer_0/output/kernel": (512, 128)}, wanted) == []
  )
  assert init_from.mismatch_problems({"bert/pooler/kernel": (128, 128)}, wanted) == [
    "this model has 1 encoder parameters the checkpoint lacks, e.g. "
    "bert/encoder/layer_0/output/kernel: match model.num_layers / scan_layers / reversible"
  ]


def test_the_registry_covers_exactly_the_named_tasks():
  assert list(registry.MAKE_TASK) == list(names.TASKS)
  assert list(registry.MAKE_FINETUNING_DATA) == list(names.FINETUNING_TASKS)


def test_vocab_comes_from_the_flag_then_init_from(tmp_path):
  default = default_corpus.default_vocab_path()
  assert registry.resolve_vocab_path("", "") == default
  run = tmp_path / "run"
  (run / "checkpoints" / "7" / "state").mkdir(parents=True)
  assert registry.resolve_vocab_path("", str(run)) == default
  (run / "config.json").write_text(json.dumps({"data": {"vocab_path": "/v/pretrain.txt"}}))
  assert registry.resolve_vocab_path("", str(run / "checkpoints")) == "/v/pretrain.txt"
  finetuned = tmp_path / "finetuned"
  (finetuned / "checkpoints" / "3" / "state").mkdir(parents=True)
  (finetuned / "config.json").write_text(
    json.dumps({"data": {"vocab_path": ""}, "init_from": str(run)})
  )
  assert registry.resolve_vocab_path("", str(finetuned)) == "/v/pretrain.txt"
  (run / "vocab.txt").write_text("[PAD]\n")
  assert registry.resolve_vocab_path("", str(run)) == str(run / "vocab.txt")
  assert registry.resolve_vocab_path("/mine.txt", str(run)) == "/mine.txt"
  # A config.json names paths inside its workdir relative to it (bert_jax.workdir).
  moved = tmp_path / "moved"
  (moved / "checkpoints" / "1" / "state").mkdir(parents=True)
  (moved / "config.json").write_text(json.dumps({"data": {"vocab_path": "spm/v.model"}}))
  assert registry.resolve_vocab_path("", str(moved)) == str(moved / "spm" / "v.model")
  with pytest.raises(UserInputError, match="holds no checkpoint"):
    registry.resolve_vocab_path("", str(tmp_path / "nowhere"))


def test_flops_count_every_encoded_sequence():
  model = ModelConfig(
    hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512, vocab_size=8192
  )
  example = ClassificationTask(model, 64, 2).example_batch(32)
  assert flops.train_flops_for_batch(model, example) == flops.train_flops_per_step(model, 32, 64, 0)
  choices = dict(example, input_ids=np.zeros((8, 4, 64), np.int32))
  assert flops.train_flops_for_batch(model, choices) == flops.train_flops_per_step(model, 32, 64, 0)
  masked = dict(example, masked_lm_positions=np.zeros((32, 20), np.int32))
  assert flops.train_flops_for_batch(model, masked) == flops.train_flops_per_step(model, 32, 64, 20)
