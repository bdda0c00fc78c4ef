"""Multiple choice (SWAG): the CSV reader, [N, C, L] features, the choice head and its loss."""

import numpy as np
import pytest

from bert_jax.data import default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.tasks.multiple_choice import features as swag_features
from bert_jax.tasks.multiple_choice import objective as multiple_choice
from bert_jax.tasks.multiple_choice import reader as swag
from bert_jax.train import settings
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, test_tagging, test_tagging_pipeline

# SWAG's header (with its unnamed index column) and two rows in its style; the second quotes
# fields that hold commas and a doubled quote.
HEADER = (
  ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
)
SWAG_CSV = (
  HEADER
  + """
0,anetv_jkn6uvmqwh4,3416,"Members of the procession walk down the street holding small horn brass instruments. A drum line","Members of the procession walk down the street holding small horn brass instruments.",A drum line,gold,passes by walking down the street playing their instruments.,has heard approaching them.,arrives and they're outside dancing and asleep.,turns the lead singer watches the performance.,0
1,lsmdc3001_21_JUMP_STREET-422,16373,"He sees her, smiles.","He sees her, smiles.",She,gen,"leaves, ""quietly"".",walks away.,looks up at him.,runs.,2
"""
)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


def write(tmp_path, text, name="val.csv"):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_reader_takes_context_start_endings_and_label(tmp_path):
  examples = swag.read_swag_csv(write(tmp_path, SWAG_CSV))
  assert examples == [
    swag.ChoiceExample(
      context="Members of the procession walk down the street holding small horn brass "
      "instruments.",
      start="A drum line",
      endings=(
        "passes by walking down the street playing their instruments.",
        "has heard approaching them.",
        "arrives and they're outside dancing and asleep.",
        "turns the lead singer watches the performance.",
      ),
      label=0,
    ),
    swag.ChoiceExample(
      context="He sees her, smiles.",
      start="She",
      endings=('leaves, "quietly".', "walks away.", "looks up at him.", "runs."),
      label=2,
    ),
  ]
  # Fewer choices read the first endings only; a label beyond them is an error.
  assert swag.read_swag_csv(write(tmp_path, SWAG_CSV), num_choices=3)[1].endings[-1] == (
    "looks up at him."
  )


@pytest.mark.parametrize(
  "text,num_choices,message",
  [
    (HEADER.replace("ending3,", "") + "\n", 4, "lacks the columns ending3"),
    (SWAG_CSV.replace(",runs.,2", ",runs.,two"), 4, r":3: label 'two' is not an ending index"),
    (SWAG_CSV.replace(",runs.,2", ",runs.,2,extra"), 4, ":3: 13 fields where the header has 12"),
    (SWAG_CSV, 2, r":3: label '2' is not an ending index in 0..1"),
    (
      SWAG_CSV.replace('"He sees her, smiles.",She', '"He sees her, smiles."x,She'),
      4,
      ":3: malformed CSV",
    ),
    ("", 4, "is empty"),
    (HEADER + "\n", 4, "has a header but no rows"),
  ],
  ids=["missing_column", "label_text", "extra_field", "label_range", "quoting", "empty", "no_rows"],
)
def test_malformed_csv_is_a_one_line_error(tmp_path, text, num_choices, message):
  path = write(tmp_path, text)
  with pytest.raises(UserInputError, match=message) as info:
    swag.read_swag_csv(path, num_choices=num_choices)
  assert path in str(info.value) and "\n" not in str(info.value)


def test_missing_file_is_clear(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere.csv does not exist"):
    swag.read_swag_csv(str(tmp_path / "nowhere.csv"))


def test_features_pair_context_with_each_ending(tokenizer):
  example = swag.ChoiceExample(
    context="He sees her.", start="She", endings=("walks away.", "runs."), label=1
  )
  features = swag_features.choice_features([example], tokenizer, max_seq_length=14)
  # he see ##s her . | she | walk ##s away . / runs .   (embedded vocab ids)
  context, she, walks_away, runs = (
    [455, 1443, 242, 781, 18],
    [1261],
    [3932, 242, 2912, 18],
    [7020, 18],
  )
  first = [2, *context, 3, *she, *walks_away, 3]
  second = [2, *context, 3, *she, *runs, 3]
  np.testing.assert_array_equal(features.input_ids[0, 0], first + [0])
  np.testing.assert_array_equal(features.input_ids[0, 1], second + [0] * 3)
  np.testing.assert_array_equal(features.token_type_ids[0, 0], [0] * 7 + [1] * 6 + [0])
  np.testing.assert_array_equal(features.token_type_ids[0, 1], [0] * 7 + [1] * 4 + [0] * 3)
  np.testing.assert_array_equal(features.input_mask[0, 1], [1] * 11 + [0] * 3)
  np.testing.assert_array_equal(features.labels, [1])
  # Too long: the longer segment loses its last tokens first, B on ties.
  short = swag_features.choice_features([example], tokenizer, max_seq_length=8)
  np.testing.assert_array_equal(
    short.input_ids[0, 0], [2, *context[:3], 3, *(she + walks_away)[:2], 3]
  )


def _tiny_task(num_choices=3, length=8):
  config = ModelConfig(
    vocab_size=64,
    hidden_size=16,
    num_layers=1,
    num_heads=2,
    intermediate_size=32,
    max_position_embeddings=length,
  )
  return multiple_choice.MultipleChoiceTask(config, max_seq_length=length, num_choices=num_choices)


def test_choice_scores_follow_their_rows_and_the_loss_skips_padding():
  task = _tiny_task()
  rng = np.random.default_rng(0)
  batch = task.example_batch(4)
  batch["input_ids"] = rng.integers(5, 64, size=(4, 3, 8)).astype(np.int32)
  batch["labels"] = np.array([0, 2, 1, 1], np.int32)
  batch["example_weight"] = np.array([1, 1, 1, 0], np.float32)
  params, forward = test_tagging.jitted_model(task, batch)
  assert set(params) == {"bert", "choice_head"}
  assert params["choice_head"]["kernel"].value.shape == (16, 1)
  outputs, loss, sums, predicted = forward(params, batch)
  logits = np.asarray(outputs["logits"])
  assert logits.shape == (4, 3)
  np.testing.assert_array_equal(predicted["logits"], logits)
  # Permuting an example's choices permutes its scores: each score belongs to its row.
  permuted = {k: v[:, ::-1] if v.ndim == 3 else v for k, v in batch.items()}
  np.testing.assert_allclose(
    forward(params, permuted)[0]["logits"], logits[:, ::-1], rtol=1e-5, atol=1e-6
  )
  log_probs = logits - np.log(np.exp(logits.astype(np.float64)).sum(-1, keepdims=True))
  expected = -np.mean([log_probs[i, batch["labels"][i]] for i in range(3)])
  np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
  assert task.metrics_from_sums(sums)["accuracy"] == pytest.approx(
    np.mean(logits[:3].argmax(-1) == batch["labels"][:3])
  )


def test_swag_config_carries_the_paper_recipe():
  run = settings.settings_from_config(
    test_tagging_pipeline.load_config(
      "swag", {"data.train_path": "train.csv", "data.eval_path": "val.csv"}
    )
  )
  assert run.trainer.task == "multiple_choice"
  assert (
    run.trainer.global_batch_size,
    run.optimizer.learning_rate,
    run.trainer.num_train_epochs,
    run.data.num_choices,
  ) == (16, 2e-5, 3.0, 4)


def test_malformed_csv_and_tfds_stop_the_run_before_training(tmp_path):
  bad = write(tmp_path, SWAG_CSV.replace(",runs.,2", ",runs.,9"), "train.csv")
  overrides = dict(
    finetune_fixtures.model_overrides(), **{"data.train_path": bad, "data.eval_path": bad}
  )
  with pytest.raises(UserInputError, match=f"^{bad}:3: label '9' is not an ending index"):
    train_and_evaluate(
      test_tagging_pipeline.load_config("swag", overrides),
      str(tmp_path / "run"),
      helpers.one_device(),
    )
  with pytest.raises(UserInputError, match="TensorFlow Datasets has no SWAG builder"):
    train_and_evaluate(
      test_tagging_pipeline.load_config(
        "swag",
        dict(overrides, **{"data.tfds_name": "swag", "data.train_path": "", "data.eval_path": ""}),
      ),
      str(tmp_path / "run"),
      helpers.one_device(),
    )
  assert not (tmp_path / "run" / "checkpoints").exists()
