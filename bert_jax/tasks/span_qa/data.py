"""The SQuAD data object of the span_qa task: examples -> features -> batches -> official scores.

Examples come from SQuAD JSON files (``data.train_path`` / ``data.eval_path``) or a locally
prepared TFDS ``squad/v1.1`` / ``squad/v2.0`` (``data.tfds_name``). Batching is the shared
fine-tuning contract (`bert_jax.tasks.feature_batches`); evaluation post-processes the eval
rows' logits into answer texts and scores them with SQuAD's official EM / F1.
"""

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
    examples = squad_reader.read_squad_tfds(config.tfds_name, split=tfds_split,
                                            data_dir=config.tfds_data_dir)
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
          "use configs/finetune/squad.py:v2 or set data.version_2_with_negative=True")
  return examples


class SquadData(feature_batches.FeatureData):
  """SQuAD v1.1 / v2.0 train and eval features; ``eval_metrics`` gives EM / F1 in percent."""

  def __init__(self, config, tokenizer):
    """Reads both splits and builds their features.

    Args:
      config: a `bert_jax.tasks.finetune_config.FinetuneDataConfig` (its span_qa keys).
      tokenizer: the WordPiece tokenizer of the model's vocab.
    """
    lengths = {"max_seq_length": config.max_seq_length,
               "max_query_length": config.max_query_length, "doc_stride": config.doc_stride}
    squad_features.check_lengths(**lengths)
    self.answer_options = squad_postprocess.AnswerOptions(
        n_best_size=config.n_best_size, max_answer_length=config.max_answer_length,
        version_2_with_negative=config.version_2_with_negative,
        null_score_diff_threshold=config.null_score_diff_threshold)
    train_examples = read_split(config, "train")
    self.eval_examples = read_split(config, "eval")
    train_features = squad_features.squad_features(train_examples, tokenizer, **lengths)
    self.eval_features = squad_features.squad_features(self.eval_examples, tokenizer, **lengths)
    logging.info("SQuAD: %d train questions -> %d features, %d eval questions -> %d features",
                 len(train_examples), len(train_features), len(self.eval_examples),
                 len(self.eval_features))
    super().__init__(train_features.arrays(), self.eval_features.arrays())

  def eval_metrics(self, predictions):
    """Official EM / F1 of the answers post-processed from every eval row's logits.

    Args:
      predictions: {"start_logits", "end_logits"}: [F_eval, L] each, rows in feature order.

    Returns:
      {"exact", "f1"} (+ "HasAns_*" / "NoAns_*" with unanswerable questions), in percent.
    """
    answers = self.predict_answers(predictions)
    gold = {e.qid: list(e.answer_texts) for e in self.eval_examples}
    return squad_metrics.squad_scores(gold, answers)

  def predict_answers(self, predictions):
    """{question id: answer text} of the eval questions from their rows' logits."""
    return squad_postprocess.predict_answers(
        self.eval_examples, self.eval_features, predictions["start_logits"],
        predictions["end_logits"], self.answer_options)


def make_data(config, tokenizer) -> SquadData:
  """The registry's entry point (`bert_jax.tasks.registry`)."""
  return SquadData(config, tokenizer)
