"""XLM's pretraining data: a TSV of parallel sentence pairs -> host-local batches for MLM, CLM
or TLM (Lample & Conneau 2019), with the pretraining pipeline's contract.

Each line of ``data.pairs_path`` is ``source<TAB>target``; ``data.pair_languages`` names the
two columns' languages (members of ``model.xlm.languages``, which numbers them). Both columns
are tokenised with the run's tokenizer (one joint vocab, `tools/train_vocab` over both
languages). Per ``data.objective``:

* ``tlm``: ``[CLS] a [SEP] [CLS] b [SEP]`` for a pair (a, b), positions restarting at the
  second ``[CLS]``, each token carrying its sentence's language; tokens are masked in both
  sentences, so a masked word can be read off its translation. Each pair is used in both
  orders (source first, target first).
* ``none`` (MLM): ``[CLS] s [SEP]`` for each sentence of each column on its own, masked.
* ``clm``: the same single sentences, unmasked; every position predicts the next token (the
  model must be ``causal``).

What the trainer relies on is as in `pretraining_pipeline`: example ``g`` of the train stream
is unit ``g % U`` of epoch ``g // U`` (U = 2 x train pairs; each epoch a permutation seeded by
``(seed, epoch)``) and is masked from ``(seed, g)``, so a saved data position resumes exactly;
process ``p`` of ``n`` reads examples ``[p*b, (p+1)*b)`` of every global batch; tf.data masks
and batches. Eval is a fixed held-out share of the pairs (``data.eval_fraction``).

Batches: ``input_ids``, ``position_ids``, ``language_ids``, ``input_mask`` int32 [b, L];
``masked_lm_positions``, ``masked_lm_ids`` int32 [b, P] and ``masked_lm_weights`` float32
[b, P] (P = ``max_predictions_per_seq``, or L for CLM: the next token at every position).
"""

import functools

import numpy as np
from absl import logging

from bert_jax import environment, names
from bert_jax.data import (
  batch_requests,
  files,
  masked_batches,
  masking,
  pretraining_examples,
  tokenization,
)
from bert_jax.errors import UserInputError

tf = environment.import_tensorflow_for_data()

OBJECTIVES = ("none", names.CLM, names.TLM)  # data.objective values of family xlm.
_TRAIN_STREAM, _MASK_STREAM = 5, 6
_SPLITS = ("train", "eval")
_KEYS = ("input_ids", "position_ids", "language_ids", "input_mask")


def read_pairs(pattern: str) -> list[tuple[str, str]]:
  """(source, target) per non-blank line of the TSV files matching ``pattern``, in file order.

  Raises:
    UserInputError: no file matches, or a line has not exactly two non-empty columns.
  """
  paths = sorted(files.glob(pattern))
  if not paths:
    raise UserInputError(f"data.pairs_path={pattern!r} matches no file; pass a TSV of pairs")
  pairs = []
  for path in paths:
    for number, line in enumerate(files.read_text(path).splitlines(), start=1):
      if not line.strip():
        continue
      columns = line.split("\t")
      if len(columns) != 2 or not all(c.strip() for c in columns):
        raise UserInputError(
          f"{path}:{number} has {len(columns)} tab-separated column(s); each line of "
          "data.pairs_path must be source<TAB>target, both non-empty"
        )
      pairs.append((columns[0].strip(), columns[1].strip()))
  return pairs


class PairsData:
  """Reads and tokenises the pairs once, then makes batch iterators for either split."""

  def __init__(self, config, model_config):
    """Args: config: the `PretrainingDataConfig`; model_config: the `ModelConfig` (family xlm).

    Raises:
      UserInputError: no pairs file, bad languages, an objective XLM has not, or a vocab that
        is not the model's.
    """
    if config.objective not in OBJECTIVES:
      raise UserInputError(
        f"data.objective={config.objective!r}: model.family='xlm' trains one of {OBJECTIVES} "
        "(none = MLM)"
      )
    if not config.pairs_path:
      raise UserInputError("model.family='xlm' reads data.pairs_path (a TSV of pairs); set it")
    if len(config.pair_languages) != 2:
      raise UserInputError(
        f"data.pair_languages={config.pair_languages!r} must name the TSV's two columns' "
        "languages, e.g. ('en', 'fr')"
      )
    self.config = config
    self.languages = tuple(model_config.xlm.language_id(n) for n in config.pair_languages)
    self.tokenizer = tokenization.load_model_tokenizer(
      config.resolved_vocab_path(),
      lowercase=config.lowercase,
      model_vocab_size=model_config.vocab_size,
    )
    pairs = read_pairs(config.pairs_path)
    columns = [self.tokenizer.encode_batch([p[i] for p in pairs]) for i in (0, 1)]
    self.pairs = list(zip(*columns))
    order = np.random.default_rng(pretraining_examples.EVAL_SEED).permutation(len(pairs))
    num_eval = int(round(config.eval_fraction * len(pairs))) if config.eval_fraction else 0
    if config.eval_fraction and len(pairs) > 1:
      num_eval = min(max(num_eval, 1), len(pairs) - 1)
    self.eval_pairs = np.sort(order[:num_eval])
    self.train_pairs = np.sort(order[num_eval:])
    if not len(self.train_pairs):
      raise UserInputError(f"data.pairs_path={config.pairs_path!r} holds no training pairs")
    self._epochs = {}
    self.masking_config = masking.masking_config_for(config, self.tokenizer, self.num_predictions)
    logging.info(
      "parallel pairs: %d (%d held out), objective %s", len(pairs), num_eval, config.objective
    )

  @property
  def num_predictions(self) -> int:
    """P: prediction slots per sequence (every position for CLM)."""
    config = self.config
    return (
      config.max_seq_length if config.objective == names.CLM else config.max_predictions_per_seq
    )

  def example(self, pair_index: int, which: int) -> dict:
    """The unmasked example of unit (pair, which): TLM's order, or the sentence's column."""
    length, special = self.config.max_seq_length, self.tokenizer.special_ids
    pair = self.pairs[pair_index]
    if self.config.objective == names.TLM:
      first, second = (0, 1) if which == 0 else (1, 0)
      a, b = list(pair[first]), list(pair[second])
      while len(a) + len(b) > length - 4:  # Trim the longer sentence (BERT's pair truncation).
        (a if len(a) >= len(b) else b).pop()
      parts = [(a, self.languages[first]), (b, self.languages[second])]
    else:
      parts = [(list(pair[which])[: length - 2], self.languages[which])]
    ids, positions, languages = [], [], []
    for tokens, language in parts:
      sentence = [special.cls] + tokens + [special.sep]
      ids += sentence
      positions += range(len(sentence))
      languages += [language] * len(sentence)
    pad = length - len(ids)
    return {
      "input_ids": np.array(ids + [special.pad] * pad, np.int32),
      "position_ids": np.array(positions + [0] * pad, np.int32),
      "language_ids": np.array(languages + [0] * pad, np.int32),
      "input_mask": np.array([1] * len(ids) + [0] * pad, np.int32),
    }

  def _epoch(self, seed: int, epoch: int) -> np.ndarray:
    """Epoch ``epoch``'s order of the train units (the last two are kept)."""
    if (seed, epoch) not in self._epochs:
      stream = pretraining_examples.stream_seed(seed, _TRAIN_STREAM)
      order = np.random.default_rng([stream, epoch]).permutation(2 * len(self.train_pairs))
      self._epochs = {k: v for k, v in self._epochs.items() if k[1] == epoch - 1}
      self._epochs[(seed, epoch)] = order
    return self._epochs[(seed, epoch)]

  def _units(self, split: str, seed: int, indices: np.ndarray) -> np.ndarray:
    """Global example indices -> units (2 * pair + which) of the split."""
    if split == "eval":
      units = 2 * self.eval_pairs[:, None] + np.arange(2)[None, :]
      return units.reshape(-1)[indices]
    size = 2 * len(self.train_pairs)
    out = np.empty(len(indices), np.int64)
    for i, index in enumerate(indices):
      unit = self._epoch(seed, int(index // size))[index % size]
      out[i] = 2 * self.train_pairs[unit // 2] + unit % 2
    return out

  def _examples(self, split, seed, indices):
    examples = [self.example(u // 2, u % 2) for u in self._units(split, seed, indices)]
    return {k: np.stack([e[k] for e in examples]) for k in _KEYS}

  def _mask_fn(self, masking_seed):
    length = tf.TensorSpec([self.config.max_seq_length], tf.int32)
    signature = {key: length for key in _KEYS} | {"example_index": tf.TensorSpec([], tf.int64)}
    config = self.masking_config
    causal = self.config.objective == names.CLM

    # No AutoGraph: `causal` is a Python bool, the rest plain ops (see masked_batches).
    @tf.function(input_signature=[signature], autograph=False)
    def mask(example):
      example = dict(example)
      index = example.pop("example_index")
      if causal:  # Next-token labels at every position; the inputs stay as they are.
        ids = example["input_ids"]
        real = tf.cast(example["input_mask"], tf.float32)
        return {
          **example,
          "masked_lm_positions": tf.range(tf.shape(ids)[0], dtype=tf.int32),
          "masked_lm_ids": tf.concat([ids[1:], ids[-1:] * 0], 0),
          "masked_lm_weights": tf.concat([real[1:], real[-1:] * 0], 0),
        }
      # As the BERT pipeline: the mask is a function of (stream seed, global example index).
      seed = tf.stack([tf.constant(masking_seed, tf.int64), index])
      return {**example, **masking.mask_example(example["input_ids"], seed, config)}

    return mask

  def batches(
    self, *, split, seed, global_batch_size, process_index=0, process_count=1, start_position=0
  ):
    """This process's share of the global batches (`pretraining_pipeline`'s arguments).

    Returns:
      A `masked_batches.PretrainingBatches` (its ``position`` is the data position to save).

    Raises:
      UserInputError: bad split, batch size, process index or position, or an eval split
        smaller than one global batch.
    """
    batch_requests.check_batch_request(
      split, _SPLITS, global_batch_size, process_index, process_count, start_position
    )
    num_batches = None
    masking_seed = pretraining_examples.stream_seed(seed, _MASK_STREAM)
    if split == "eval":
      available = 2 * len(self.eval_pairs)
      if self.config.num_eval_examples:
        available = min(available, self.config.num_eval_examples)
      if available < global_batch_size:
        raise UserInputError(
          f"the eval split has {available} examples, fewer than one global batch of "
          f"{global_batch_size}; raise data.eval_fraction or lower the batch size"
        )
      num_batches = max(0, (available - start_position) // global_batch_size)
      masking_seed = pretraining_examples.stream_seed(pretraining_examples.EVAL_SEED, _MASK_STREAM)
    return masked_batches.batches_by_index(
      functools.partial(self._examples, split, seed),
      self._mask_fn(masking_seed),
      start_position=start_position,
      process_index=process_index,
      process_count=process_count,
      global_batch_size=global_batch_size,
      num_batches=num_batches,
    )
