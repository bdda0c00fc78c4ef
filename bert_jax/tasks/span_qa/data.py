"""The SQuAD data object of the span_qa task: examples -> features -> batches -> official scores.

Examples come from SQuAD JSON files (``data.train_path`` / ``data.eval_path``) or a locally
prepared TFDS ``squad/v1.1`` / ``squad/v2.0`` (``data.tfds_name``). Batching is the shared
fine-tuning contract (`bert_jax.tasks.feature_batches`); evaluation post-processes the eval
rows' logits into answer texts and scores them with SQuAD's official EM / F1.

Every eval also returns run_squad.py's files for ``<workdir>/predictions/``: predictions.json
({qid: answer}), nbest_predictions.json ({qid: [{text, probability, start_logit, end_logit}]})
and, for v2.0, null_odds.json ({qid: null score diff}); v2.0 evals add evaluate-v2.0's best
no-answer thresholds (best_exact, best_exact_thresh, best_f1, best_f1_thresh).
"""

import json

from absl import logging

from bert_jax.errors import UserInputError
from bert_jax.tasks import feature_batches
from bert_jax.tasks.span_qa import features as squad_features
from bert_jax.tasks.span_qa import metrics as squad_metrics
from bert_jax.tasks.span_qa import postprocess as squad_postprocess
from bert_jax.tasks.span_qa import reader as squad_reader


def read_split(config, split):
  """The examples of ``split`` ("train" or "eval") of a `FinetuneDataConfig`.

  Raises:
    UserInputError: unreadable data, or unanswerable questions without
      ``data.version_2_with_negative``.
  """
  if config.tfds_name:
    tfds_split = config.tfds_train_split if split == "train" else config.tfds_eval_split
    examples = squad_reader.read_squad_tfds(
      config.tfds_name, split=tfds_split, data_dir=config.tfds_data_dir
    )
    source = f"TFDS {config.tfds_name}[{tfds_split}]"
  else:
    source = config.train_path if split == "train" else config.eval_path
    examples = squad_reader.read_squad_json(source)
  limit = config.max_train_examples if split == "train" else config.max_eval_examples
  examples = examples[:limit] if limit else examples
  if not config.version_2_with_negative:
    impossible = next((e for e in examples if e.is_impossible), None)
    if impossible is not None:
      raise UserInputError(
        f"{source} has unanswerable questions (e.g. id {impossible.qid!r}), i.e. SQuAD 2.0; "
        "use configs/finetune/squad.py:v2 or set data.version_2_with_negative=True"
      )
  return examples


class SquadData(feature_batches.FeatureData):
  """SQuAD v1.1 / v2.0 train and eval features; ``eval_metrics`` gives EM / F1 in percent."""

  def __init__(self, config, tokenizer):
    """Reads both splits and builds their features.

    Args:
      config: a `bert_jax.tasks.finetune_config.FinetuneDataConfig` (its span_qa keys).
      tokenizer: the WordPiece tokenizer of the model's vocab.
    """
    lengths = {
      "max_seq_length": config.max_seq_length,
      "max_query_length": config.max_query_length,
      "doc_stride": config.doc_stride,
    }
    squad_features.check_lengths(**lengths)
    self.answer_options = squad_postprocess.AnswerOptions(
      n_best_size=config.n_best_size,
      max_answer_length=config.max_answer_length,
      version_2_with_negative=config.version_2_with_negative,
      null_score_diff_threshold=config.null_score_diff_threshold,
    )
    train_examples = read_split(config, "train")
    self.eval_examples = read_split(config, "eval")
    train_features = squad_features.squad_features(train_examples, tokenizer, **lengths)
    self.eval_features = squad_features.squad_features(self.eval_examples, tokenizer, **lengths)
    logging.info(
      "SQuAD: %d train questions -> %d features, %d eval questions -> %d features",
      len(train_examples),
      len(train_features),
      len(self.eval_examples),
      len(self.eval_features),
    )
    super().__init__(train_features.arrays(), self.eval_features.arrays())

  def eval_metrics(self, predictions):
    """Official EM / F1 of the answers post-processed from every eval row's logits.

    Args:
      predictions: {"start_logits", "end_logits"}: [F_eval, L] each, rows in feature order.

    Returns:
      {"exact", "f1"} (+ "HasAns_*" / "NoAns_*" with unanswerable questions, and the v2.0
      "best_*" thresholds), in percent.
    """
    return self.evaluate(predictions)[0]

  def evaluate(self, predictions):
    """`eval_metrics` and run_squad.py's prediction files (see the module docstring)."""
    results = squad_postprocess.predict(
      self.eval_examples,
      self.eval_features,
      predictions["start_logits"],
      predictions["end_logits"],
      self.answer_options,
    )
    answers = {qid: p.answer for qid, p in results.items()}
    gold = {e.qid: list(e.answer_texts) for e in self.eval_examples}
    metrics = squad_metrics.squad_scores(gold, answers)
    files = {
      "predictions.json": answers,
      "nbest_predictions.json": {qid: p.nbest for qid, p in results.items()},
    }
    if self.answer_options.version_2_with_negative:
      null_odds = {qid: p.null_odds for qid, p in results.items()}
      metrics.update(squad_metrics.best_thresholds(gold, answers, null_odds))
      files["null_odds.json"] = null_odds
    return metrics, {
      name: json.dumps(value, indent=2, ensure_ascii=False) + "\n" for name, value in files.items()
    }


def make_data(config, tokenizer) -> SquadData:
  """The registry's entry point (`bert_jax.tasks.registry`)."""
  return SquadData(config, tokenizer)
