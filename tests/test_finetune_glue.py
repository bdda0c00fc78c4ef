"""GLUE readers (TSV layouts, CSV, TFDS errors), pair features, and the GLUE metric sets."""

import dataclasses

import numpy as np
import pytest
import transformers

from bert_jax.data import default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.tasks import finetune_config
from bert_jax.tasks.classification import data as glue_data
from bert_jax.tasks.classification import features as glue_features
from bert_jax.tasks.classification import metrics as classification_metrics
from bert_jax.tasks.classification import reader as glue
from tests import finetune_fixtures


def _write(tmp_path, name, lines):
  path = tmp_path / name
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


def test_glue_layouts_read_their_own_files(tmp_path):
  cola = _write(
    tmp_path,
    "cola.tsv",
    [
      "gj04\t1\t\tThe sailors rode the breeze clear.",
      'gj04\t0\t*\tThe more we study verbs, "the crazier.',
    ],
  )
  assert glue.read_file(cola, glue.glue_layout("cola")) == [
    glue.SentenceExample("The sailors rode the breeze clear.", None, 1),
    glue.SentenceExample('The more we study verbs, "the crazier.', None, 0),
  ]
  mnli = _write(
    tmp_path,
    "mnli.tsv",
    [
      (
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
      ),
      "0\t1\t1e\tgov\t(x)\t(y)\t(X)\t(Y)\tA man eats.\tSomeone eats.\tentailment\tentailment",
      "1\t2\t2c\tgov\t(x)\t(y)\t(X)\t(Y)\tA man eats.\tNobody eats.\tneutral\tcontradiction",
    ],
  )
  # Ids follow TFDS glue/mnli: entailment 0, neutral 1, contradiction 2.
  assert [e.label for e in glue.read_file(mnli, glue.glue_layout("mnli"))] == [0, 2]
  stsb = _write(
    tmp_path,
    "stsb.tsv",
    [
      "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
      "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane.\tAn airplane.\t4.800",
    ],
  )
  assert glue.read_file(stsb, glue.glue_layout("stsb")) == [
    glue.SentenceExample("A plane.", "An airplane.", 4.8)
  ]
  mrpc_train, _ = finetune_fixtures.write_mrpc_files(tmp_path, num_train=8, num_eval=4)
  examples = glue.read_file(mrpc_train, glue.glue_layout("mrpc"), max_examples=5)
  assert len(examples) == 5 and all(e.text_b for e in examples)  # The BOM header parses.
  custom = tmp_path / "reviews.csv"
  custom.write_text('text,stars\n"Good, really good",pos\nBad,neg\n', encoding="utf-8")
  layout = glue.custom_layout("text", "", "stars", ("neg", "pos"))
  assert glue.read_file(str(custom), layout) == [
    glue.SentenceExample("Good, really good", None, 1),
    glue.SentenceExample("Bad", None, 0),
  ]
  assert layout.metrics == ("accuracy", "f1")


@pytest.mark.parametrize(
  "lines,expected",
  [
    (["#1 String\tQuality", "a\t1"], r"no column '#2 String' in its header"),
    (
      ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "1\t1\t2\tonly four"],
      r"mrpc.tsv:2 has 4 columns, the task needs at least 5",
    ),
    (
      ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "yes\t1\t2\ta\tb"],
      r"mrpc.tsv:2: label 'yes' is not one of \('0', '1'\)",
    ),
    ([], "is empty"),
  ],
  ids=["missing_column", "short_row", "bad_label", "empty"],
)
def test_malformed_files_name_the_line(tmp_path, lines, expected):
  path = _write(tmp_path, "mrpc.tsv", lines)
  with pytest.raises(UserInputError, match=expected):
    glue.read_file(path, glue.glue_layout("mrpc"))


def test_unknown_task_missing_file_and_unprepared_tfds(tmp_path):
  with pytest.raises(UserInputError, match="'mrcp' is not a GLUE task; choose one of cola"):
    glue.glue_layout("mrcp")
  with pytest.raises(UserInputError, match="nowhere.tsv does not exist"):
    glue.read_file(str(tmp_path / "nowhere.tsv"), glue.glue_layout("rte"))
  with pytest.raises(UserInputError, match=r"not prepared in .*tfds build glue/rte"):
    glue.read_tfds("glue/rte", glue.glue_layout("rte"), split="train", data_dir=str(tmp_path))


def test_pair_features_equal_the_transformers_tokenizer():
  """[CLS] A [SEP] B [SEP], longest segment truncated first, as BertTokenizer(a, b)."""
  vocab = default_corpus.default_vocab_path()
  ours = tokenization.load_wordpiece(vocab)
  reference = transformers.BertTokenizer(vocab_file=vocab, do_lower_case=True)
  sentences = [" ".join(words) for _, words in finetune_fixtures.corpus_sentences()[:40]]
  pairs = [glue.SentenceExample(a, b, 0) for a, b in zip(sentences[::2], sentences[1::2])]
  singles = [glue.SentenceExample(a, None, 1) for a in sentences]
  for examples, length in ((pairs, 24), (pairs, 64), (singles, 16)):
    features = glue_features.sentence_features(examples, ours, length)
    expected = reference(
      [e.text_a for e in examples],
      None if examples[0].text_b is None else [e.text_b for e in examples],
      truncation="longest_first",
      max_length=length,
      padding="max_length",
    )
    np.testing.assert_array_equal(features["input_ids"], expected["input_ids"])
    np.testing.assert_array_equal(features["token_type_ids"], expected["token_type_ids"])
    np.testing.assert_array_equal(features["input_mask"], expected["attention_mask"])
  assert features["labels"].dtype == np.int32 and set(features["labels"]) == {1}


def test_glue_metric_sets_and_degenerate_inputs():
  assert {task: layout.metrics for task, layout in glue.GLUE_TASKS.items()} == {
    "cola": ("matthews_corrcoef",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "qqp": ("f1", "accuracy"),
    "stsb": ("pearson", "spearman"),
    "mnli": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
  }
  assert {task: layout.num_labels for task, layout in glue.GLUE_TASKS.items()} == {
    "cola": 2,
    "sst2": 2,
    "mrpc": 2,
    "qqp": 2,
    "stsb": 1,
    "mnli": 3,
    "qnli": 2,
    "rte": 2,
    "wnli": 2,
  }
  # Precision 2/3 and recall 2/3 of label 1; accuracy 2/4; MCC (2*0 - 1*1)/sqrt(3*1*3*1).
  got = classification_metrics.compute(
    ("accuracy", "f1", "matthews_corrcoef"), [1, 0, 1, 1], [1, 1, 1, 0]
  )
  assert got == pytest.approx({"accuracy": 0.5, "f1": 2 / 3, "matthews_corrcoef": -1 / 3})
  got = classification_metrics.compute(
    ("pearson", "spearman"), [0.0, 1.0, 2.0, 5.0], [0.1, 0.2, 0.3, 0.4]
  )
  assert got["spearman"] == pytest.approx(1.0) and 0.9 < got["pearson"] < 1.0
  # Undefined scores are the uninformative predictor's, never NaN.
  constant = classification_metrics.compute(
    ("pearson", "spearman", "matthews_corrcoef", "f1"), [0, 1, 0, 1], [0, 0, 0, 0]
  )
  assert constant == {"pearson": 0.0, "spearman": 0.0, "matthews_corrcoef": 0.0, "f1": 0.0}


def test_tfds_glue_gives_the_tsv_features(tmp_path):
  """A TFDS copy with glue/mrpc's features (written offline by TFDS's own writer) gives the
  features of the same examples read from GLUE's TSV; its unlabelled test split is refused."""
  tfds = pytest.importorskip("tensorflow_datasets")
  train, dev = finetune_fixtures.write_mrpc_files(tmp_path, num_train=24, num_eval=8)
  layout = glue.glue_layout("mrpc")
  splits = {"train": glue.read_file(train, layout), "validation": glue.read_file(dev, layout)}
  splits["test"] = [glue.SentenceExample("a", "b", -1)]
  name = "bert_jax_test_glue_mrpc"
  tfds.dataset_builders.store_as_tfds_dataset(
    name=name,
    version="1.0.0",
    data_dir=str(tmp_path / "tfds"),
    disable_shuffling=True,
    features=tfds.features.FeaturesDict(
      {
        "sentence1": tfds.features.Text(),
        "sentence2": tfds.features.Text(),
        "label": tfds.features.ClassLabel(names=["not_equivalent", "equivalent"]),
        "idx": tfds.features.Scalar(np.int32),
      }
    ),
    split_datasets={
      split: [
        (i, {"sentence1": e.text_a, "sentence2": e.text_b, "label": e.label, "idx": i})
        for i, e in enumerate(examples)
      ]
      for split, examples in splits.items()
    },
  )
  tokenizer = tokenization.load_wordpiece(default_corpus.default_vocab_path())
  from_files = glue_data.make_data(
    finetune_config.FinetuneDataConfig(
      glue_task="mrpc", train_path=train, eval_path=dev, max_seq_length=32
    ),
    tokenizer,
  )
  tfds_config = finetune_config.FinetuneDataConfig(
    glue_task="mrpc", tfds_name=name, tfds_data_dir=str(tmp_path / "tfds"), max_seq_length=32
  )
  from_tfds = glue_data.make_data(tfds_config, tokenizer)
  for split in ("train_arrays", "eval_arrays"):
    for key, value in getattr(from_files, split).items():
      np.testing.assert_array_equal(getattr(from_tfds, split)[key], value, err_msg=key)
  with pytest.raises(UserInputError, match=r"\[test\] has no labels"):
    glue_data.make_data(dataclasses.replace(tfds_config, tfds_eval_split="test"), tokenizer)
