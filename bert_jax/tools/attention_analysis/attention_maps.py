"""Token-level attention of every sentence from a workdir's model, through tools/embed.

Each sentence becomes ``[CLS] words [SEP]`` (``<s> words </s>`` for RoBERTa-style vocabs);
one that does not fit the model's positions, or has a word the tokenizer turns into nothing,
is skipped and counted. Batches are padded to a multiple of `_LENGTH_STEP` tokens so the
model compiles once per length bucket, not once per batch.
"""

import dataclasses

import jax
import numpy as np

from bert_jax.tools import embed
from bert_jax.tools.attention_analysis import word_maps
from bert_jax.tools.embed_examples import Features

_LENGTH_STEP = 16


@dataclasses.dataclass(frozen=True)
class Example:
  """One sentence ready for the model."""

  index: int  # 0-based position of the sentence in the file.
  sentence: object  # Its `conllu.Sentence`.
  ids: np.ndarray  # [T] int32 token ids, special tokens included.
  words_of_tokens: np.ndarray  # [T] int32 word of each token, -1 for special tokens.


@dataclasses.dataclass(frozen=True)
class Skipped:
  """0-based positions of the sentences left out, by reason."""

  too_long: tuple
  empty_word: tuple


def examples(sentences, tokenizer, max_positions: int):
  """(the `Example`s that fit, `Skipped`).

  Args:
    sentences: `conllu.Sentence`s.
    tokenizer: the model's tokenizer.
    max_positions: the model's max_position_embeddings.
  """
  kept, too_long, empty_word = [], [], []
  for index, (sentence, word_ids) in enumerate(
    zip(sentences, word_maps.token_ids(sentences, tokenizer))
  ):
    counts = [len(ids) for ids in word_ids]
    if min(counts) == 0:
      empty_word.append(index)
      continue
    ids, _ = tokenizer.with_special_tokens([i for ids in word_ids for i in ids])
    if len(ids) > max_positions:
      too_long.append(index)
      continue
    ids = np.array(ids, np.int32)
    kept.append(Example(index, sentence, ids, word_maps.word_of_token(counts, len(ids))))
  return kept, Skipped(tuple(too_long), tuple(empty_word))


def _features(batch, max_positions: int) -> Features:
  lengths = np.array([len(example.ids) for example in batch], np.int32)
  width = min(-(-int(lengths.max()) // _LENGTH_STEP) * _LENGTH_STEP, max_positions)
  input_ids = np.zeros((len(batch), width), np.int32)
  for row, example in enumerate(batch):
    input_ids[row, : len(example.ids)] = example.ids
  return Features(input_ids=input_ids, token_type_ids=np.zeros_like(input_ids), lengths=lengths)


def attention(examples_, params, model, batch_size: int):
  """Yields (`Example`, [layers, heads, T, T] float32 attention over its T tokens) in order.

  Args:
    examples_: from `examples`.
    params: the run's ``bert`` params (unscanned layout).
    model: its `ModelConfig`.
    batch_size: sentences per model call.

  Raises:
    UserInputError: the model forms no softmax attention matrix (`embed.embed_features`).
  """
  params = jax.device_put(params)  # Once, not once per batch.
  for start in range(0, len(examples_), batch_size):
    batch = examples_[start : start + batch_size]
    maps = embed.embed_features(
      params,
      model,
      _features(batch, model.max_position_embeddings),
      layers=(model.num_layers,),
      with_attention=True,
      batch_size=batch_size,
    )["attention"]
    for example, maps_NHLL in zip(batch, maps):
      length = len(example.ids)
      yield example, maps_NHLL[:, :, :length, :length]
