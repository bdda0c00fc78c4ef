"""GLUE leaderboard files: test.tsv layouts -> ``<TASK>.tsv`` bytes from hand-made logits.

Each GLUE task's test.tsv (an ``index`` column, no label; CoLA's has a header although its
train/dev.tsv do not; QQP calls the column ``id``) is read through `make_data` with
``data.test_path``; the written file is compared byte for byte with the leaderboard format.
"""

import numpy as np
import pytest

from bert_jax import default_config
from bert_jax.data import default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.tasks import finetune_config, registry
from bert_jax.tasks.classification import data as glue_data
from bert_jax.tasks.classification import prediction_files
from bert_jax.train import settings as settings_lib


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


def _write(directory, name, lines):
  path = directory / name
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


_PAIR_TRAIN = ["sentence1\tsentence2\tlabel", "a cat sat\ta cat\tentailment"]
# (glue_task, train/dev lines, test file name, test lines, logits of the 3 test rows,
#  expected <TASK>.tsv name, expected lines after the header).
CASES = {
  "cola": (
    "cola",
    ["gj04\t1\t\tThe cat sat."],
    "test.tsv",
    ["index\tsentence", "0\tThe cat sat.", "1\tCat the sat.", "2\tSat."],
    [[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]],
    "CoLA.tsv",
    ["0\t1", "1\t0", "2\t0"],
  ),
  "sst2": (
    "sst2",
    ["sentence\tlabel", "good\t1"],
    "test.tsv",
    ["index\tsentence", "0\tgood", "1\tbad", "2\tfine"],
    [[1.0, 0.0], [0.0, 3.0], [-1.0, -2.0]],
    "SST-2.tsv",
    ["0\t0", "1\t1", "2\t0"],
  ),
  "mrpc": (
    "mrpc",
    ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "1\t1\t2\ta b\ta"],
    "test.tsv",
    [
      "index\t#1 ID\t#2 ID\t#1 String\t#2 String",
      "0\t7\t8\ta b\ta",
      "1\t9\t10\tc\td",
      "2\t11\t12\te f\te",
    ],
    [[0.0, 1.0], [1.0, 0.0], [0.0, 0.1]],
    "MRPC.tsv",
    ["0\t1", "1\t0", "2\t1"],
  ),
  "qqp": (
    "qqp",
    ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "0\t1\t2\tq\tr\t0"],
    "test.tsv",
    ["id\tquestion1\tquestion2", "5\twho?\twhom?", "6\twhy?\thow?", "7\twhat?\twhat?"],
    [[0.0, 1.0], [1.0, 0.0], [0.0, 2.0]],
    "QQP.tsv",
    ["5\t1", "6\t0", "7\t1"],
  ),
  "stsb": (
    "stsb",
    ["sentence1\tsentence2\tscore", "a\tb\t2.5"],
    "test.tsv",
    [
      "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
      "0\tnews\tf\t2015\t1\tx\ty\tA man.\tA dog.",
      "1\tnews\tf\t2015\t2\tx\ty\tA cat.\tA cat.",
      "2\tnews\tf\t2015\t3\tx\ty\tA.\tB.",
    ],
    [[1.23449], [4.9996], [-0.25]],
    "STS-B.tsv",
    ["0\t1.234", "1\t5.000", "2\t-0.250"],
  ),
  "mnli_m": (
    "mnli",
    ["sentence1\tsentence2\tgold_label", "a\tb\tneutral"],
    "test_matched.tsv",
    [
      "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2",
      "0\t1\t1n\tfic\ta\tb",
      "1\t2\t2n\tfic\tc\td",
      "2\t3\t3n\tfic\te\tf",
    ],
    [[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]],
    "MNLI-m.tsv",
    ["0\tentailment", "1\tneutral", "2\tcontradiction"],
  ),
  "mnli_mm": (
    "mnli",
    ["sentence1\tsentence2\tgold_label", "a\tb\tneutral"],
    "test_mismatched.tsv",
    ["index\tsentence1\tsentence2", "0\ta\tb", "1\tc\td", "2\te\tf"],
    [[0.0, 0.0, 3.0], [3.0, 0.0, 0.0], [0.0, 3.0, 0.0]],
    "MNLI-mm.tsv",
    ["0\tcontradiction", "1\tentailment", "2\tneutral"],
  ),
  "ax": (
    "mnli",
    ["sentence1\tsentence2\tgold_label", "a\tb\tneutral"],
    "diagnostic.tsv",
    ["index\tsentence1\tsentence2", "0\ta\tb", "1\tc\td", "2\te\tf"],
    [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]],
    "AX.tsv",
    ["0\tneutral", "1\tentailment", "2\tentailment"],
  ),
  "qnli": (
    "qnli",
    ["question\tsentence\tlabel", "q\ts\tentailment"],
    "test.tsv",
    ["index\tquestion\tsentence", "0\tq\ts", "1\tr\tt", "2\tu\tv"],
    [[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]],
    "QNLI.tsv",
    ["0\tentailment", "1\tnot_entailment", "2\tentailment"],
  ),
  "rte": (
    "rte",
    _PAIR_TRAIN,
    "test.tsv",
    ["index\tsentence1\tsentence2", "0\ta\tb", "1\tc\td", "2\te\tf"],
    [[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]],
    "RTE.tsv",
    ["0\tnot_entailment", "1\tnot_entailment", "2\tentailment"],
  ),
  "wnli": (
    "wnli",
    ["sentence1\tsentence2\tlabel", "a\tb\t1"],
    "test.tsv",
    ["index\tsentence1\tsentence2", "0\ta\tb", "1\tc\td", "2\te\tf"],
    [[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]],
    "WNLI.tsv",
    ["0\t1", "1\t0", "2\t0"],
  ),
}


@pytest.mark.parametrize("case", CASES)
def test_glue_test_predictions_are_the_leaderboard_file(case, tokenizer, tmp_path):
  task, train_lines, test_name, test_lines, logits, name, expected = CASES[case]
  train = _write(tmp_path, "train.tsv", train_lines)
  test = _write(tmp_path, test_name, test_lines)
  data = glue_data.make_data(
    finetune_config.FinetuneDataConfig(
      glue_task=task, train_path=train, eval_path=train, test_path=test, max_seq_length=16
    ),
    tokenizer,
  )
  assert len(data.test_arrays["input_ids"]) == 3
  assert not data.test_arrays["labels"].any()
  files = data.test_prediction_files({"logits": np.array(logits, np.float32)})
  assert files == {name: "index\tprediction\n" + "".join(line + "\n" for line in expected)}


def test_test_rows_get_the_eval_rows_features(tokenizer, tmp_path):
  """The same sentences give the same model inputs whether read as dev or as test rows."""
  dev = _write(
    tmp_path,
    "dev.tsv",
    ["sentence1\tsentence2\tlabel", "a cat\tthe dog\t1", "it rains\tit pours\t0"],
  )
  test = _write(
    tmp_path,
    "test.tsv",
    ["index\tsentence1\tsentence2", "10\ta cat\tthe dog", "11\tit rains\tit pours"],
  )
  data = glue_data.make_data(
    finetune_config.FinetuneDataConfig(
      glue_task="wnli", train_path=dev, eval_path=dev, test_path=test, max_seq_length=16
    ),
    tokenizer,
  )
  for key in ("input_ids", "token_type_ids", "input_mask"):
    np.testing.assert_array_equal(data.test_arrays[key], data.eval_arrays[key])
  assert data.test_ids == ["10", "11"]


def test_custom_csv_test_file_without_index_and_dev_predictions_on_request(tokenizer, tmp_path):
  train = _write(tmp_path, "train.csv", ["text,label", "good,pos", "bad,neg", '"so, so",mid'])
  test = _write(tmp_path, "test.csv", ["text", '"fine, really"', "awful"])
  config = finetune_config.FinetuneDataConfig(
    train_path=train,
    eval_path=train,
    test_path=test,
    text_a_column="text",
    label_column="label",
    label_names=("neg", "pos", "mid"),
    max_seq_length=16,
    write_eval_predictions=True,
  )
  data = glue_data.make_data(config, tokenizer)
  assert data.test_prediction_files({"logits": np.array([[0, 0, 1], [1, 0, 0]])}) == {
    "test.tsv": "index\tprediction\n0\tmid\n1\tneg\n"
  }
  metrics, files = data.evaluate({"logits": np.array([[0, 1, 0], [1, 0, 0], [0, 1, 0]])})
  assert files == {"dev/test.tsv": "index\tprediction\n0\tpos\n1\tneg\n2\tpos\n"}
  assert metrics == {"accuracy": 2 / 3}
  # Without the request: metrics only.
  silent = glue_data.make_data(
    finetune_config.FinetuneDataConfig(
      train_path=train,
      eval_path=train,
      text_a_column="text",
      label_column="label",
      label_names=("neg", "pos", "mid"),
      max_seq_length=16,
    ),
    tokenizer,
  )
  assert silent.test_arrays is None
  assert silent.evaluate({"logits": np.array([[0, 1, 0], [1, 0, 0], [0, 1, 0]])}) == (
    {"accuracy": 2 / 3},
    {},
  )


@pytest.mark.parametrize(
  "lines,expected",
  [
    (["index\tsentence1", "0\ta"], r"test.tsv has no column 'sentence2' in its header"),
    (
      ["index\tsentence1\tsentence2", "0\ta"],
      r"test.tsv:2 has 2 columns, the task needs at "
      "least 3",
    ),
    ([], "test.tsv is empty; it needs a header line"),
  ],
)
def test_malformed_test_files_are_one_line_errors(lines, expected, tokenizer, tmp_path):
  train = _write(tmp_path, "train.tsv", _PAIR_TRAIN)
  test = _write(tmp_path, "test.tsv", lines)
  config = finetune_config.FinetuneDataConfig(
    glue_task="rte", train_path=train, eval_path=train, test_path=test
  )
  with pytest.raises(UserInputError, match=expected) as error:
    glue_data.make_data(config, tokenizer)
  assert "\n" not in str(error.value)
  missing = config.__class__(
    glue_task="rte", train_path=train, eval_path=train, test_path=str(tmp_path / "nowhere.tsv")
  )
  with pytest.raises(UserInputError, match="nowhere.tsv does not exist; set data.test_path"):
    glue_data.make_data(missing, tokenizer)


def test_leaderboard_names():
  assert [
    prediction_files.leaderboard_name(task, "gs://b/GLUE/X/test.tsv")
    for task in ("cola", "sst2", "mrpc", "qqp", "stsb", "qnli", "rte", "wnli", "")
  ] == ["CoLA", "SST-2", "MRPC", "QQP", "STS-B", "QNLI", "RTE", "WNLI", "test"]
  assert [
    prediction_files.leaderboard_name("mnli", path)
    for path in (
      "MNLI/test_matched.tsv",
      "MNLI/test_mismatched.tsv",
      "diagnostic/diagnostic.tsv",
      "AX.tsv",
    )
  ] == ["MNLI-m", "MNLI-mm", "AX", "AX"]


def test_test_path_of_a_task_without_test_predictions_is_refused(tmp_path):
  config = default_config.finetune_config("span_qa")
  config.data.train_path = config.data.eval_path = str(tmp_path / "squad.json")
  config.data.test_path = str(tmp_path / "test.json")
  with pytest.raises(
    UserInputError, match="data.test_path is set but task 'span_qa' writes no test predictions"
  ):
    registry.make_data(settings_lib.settings_from_config(config).task_settings)
