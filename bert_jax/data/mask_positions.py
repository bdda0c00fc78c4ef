"""Position strategies for masked LM: which tokens of one sequence to predict.

Each strategy is a pure TensorFlow function ``choose(input_ids_L, maskable_L, seed, config) ->
chosen_L`` (bool [L]) built only from ``tf.random.stateless_*`` ops and static shapes, so it runs
inside a tf.data ``map`` and gives the same answer for the same (ids, seed) anywhere.

* ``token``: BERT's original, a uniform random set of maskable tokens.
* ``whole_word``: BERT's whole-word masking. A word is a maskable piece that does not continue
  a word plus the continuation pieces after it (``##x`` in WordPiece; pieces without the ``▁``
  word marker in SentencePiece). Words are visited in random order and taken whole while they
  fit the budget; a word that does not fit is skipped and later, shorter words may still fill
  the budget (as BERT's tool does), so a word is never split.
* ``span``: SpanBERT. Span lengths in words are drawn from Geometric(p) truncated to
  ``[1, max_span_length]`` (renormalised, as in the SpanBERT paper: p=0.2, 10 words, mean 3.8);
  each span starts at a uniformly random word. Spans are taken in order while their union fits
  the budget; the first span that does not fit is cut to the whole words that still fit, and
  that ends the choice.
* ``ngram``: ALBERT's n-gram masking, the ``span`` procedure with n-gram lengths n = 1..3 words
  drawn with P(n) proportional to 1/n (6/11, 3/11, 2/11).

The budget of every strategy is the same count of tokens: ``min(P, max(1, round(n *
mask_prob)))`` for ``n`` maskable tokens.
"""

import numpy as np

from bert_jax import environment

tf = environment.import_tensorflow_for_data()

# Whole-word fill: passes of "take the words, in random order, whose running total still fits".
# Each pass continues after words that did not fit; three passes leave the budget within a
# fraction of a word of BERT's one-by-one greedy loop (measured: 15.2% of maskable tokens).
_WHOLE_WORD_FILL_PASSES = 3


def maskable_positions(input_ids_L, special_ids):
  """Boolean [L]: tokens that may be predicted (not [CLS], [SEP] or [PAD] padding)."""
  return (
    (input_ids_L != special_ids.cls)
    & (input_ids_L != special_ids.sep)
    & (input_ids_L != special_ids.pad)
  )


def num_to_predict(num_maskable, mask_prob, max_predictions_per_seq):
  """``min(P, max(1, round(n * mask_prob)))``, 0 when nothing is maskable; int32 scalar.

  Rounds half to even in float64, the same as Python's ``round`` in BERT's data tool.
  """
  wanted = tf.cast(tf.round(tf.cast(num_maskable, tf.float64) * mask_prob), tf.int32)
  wanted = tf.minimum(max_predictions_per_seq, tf.maximum(1, wanted))
  return tf.where(num_maskable > 0, wanted, 0)


def _budget(maskable_L, config):
  num_maskable = tf.reduce_sum(tf.cast(maskable_L, tf.int32))
  return num_to_predict(num_maskable, config.mask_prob, config.max_predictions_per_seq)


def choose_token_positions(input_ids_L, maskable_L, seed, config):
  """Token strategy: a uniformly random set of ``budget`` maskable positions.

  Args:
    input_ids_L: int32 [L] (unused by this strategy; word- and span-level ones need it).
    maskable_L: bool [L].
    seed: int64 [2] stateless seed.
    config: a ``masking.MaskingConfig``.

  Returns:
    bool [L]: the chosen positions, at most ``max_predictions_per_seq`` of them.
  """
  del input_ids_L
  count = _budget(maskable_L, config)
  # The `count` smallest of i.i.d. uniform scores form a uniform random subset; unmaskable
  # positions score above every maskable one and count <= num_maskable, so they never win.
  scores_L = tf.random.stateless_uniform(tf.shape(maskable_L), seed=seed)
  scores_L = tf.where(maskable_L, scores_L, 2.0)
  rank_L = tf.math.invert_permutation(tf.argsort(scores_L, stable=True))
  return rank_L < count


def word_structure(input_ids_L, maskable_L, continuation):
  """Splits the maskable tokens of a sequence into words.

  Args:
    input_ids_L: int32 [L].
    maskable_L: bool [L].
    continuation: bool [vocab_size] tensor, True for pieces that continue the previous word.

  Returns:
    ``(word_L, word_length_L, num_words)``: the word index of every token (``L`` for tokens
    that are not maskable, so they fall outside every word), the token count of word ``w`` at
    index ``w`` (0 past ``num_words``), and the number of words.
  """
  length = tf.shape(input_ids_L)[0]
  previous_maskable_L = tf.concat([[False], maskable_L[:-1]], axis=0)
  # A continuation piece right after [CLS]/[SEP] has no word to join, so it starts one.
  starts_L = maskable_L & (~tf.gather(continuation, input_ids_L) | ~previous_maskable_L)
  word_L = tf.cumsum(tf.cast(starts_L, tf.int32)) - 1
  word_L = tf.where(maskable_L, word_L, length)
  word_length_L = tf.math.unsorted_segment_sum(
    tf.ones_like(word_L), word_L, num_segments=length + 1
  )[:length]
  return word_L, word_length_L, tf.reduce_sum(tf.cast(starts_L, tf.int32))


def _words_and_budget(input_ids_L, maskable_L, config):
  """What the word-level strategies start from: `word_structure`, the length L, the budget."""
  continuation = tf.constant(config.continuation, tf.bool)
  word_L, word_length_L, num_words = word_structure(input_ids_L, maskable_L, continuation)
  return word_L, word_length_L, num_words, tf.shape(input_ids_L)[0], _budget(maskable_L, config)


def choose_whole_word_positions(input_ids_L, maskable_L, seed, config):
  """Whole-word strategy: random whole words up to the token budget (never a part of one).

  Args:
    input_ids_L: int32 [L].
    maskable_L: bool [L].
    seed: int64 [2] stateless seed.
    config: a ``masking.MaskingConfig`` with ``continuation`` set.

  Returns:
    bool [L]: every piece of each chosen word; at most the budget of tokens.
  """
  word_L, word_length_L, num_words, length, budget = _words_and_budget(
    input_ids_L, maskable_L, config
  )
  scores_L = tf.random.stateless_uniform([length], seed=seed)
  scores_L = tf.where(tf.range(length) < num_words, scores_L, 2.0)
  order_L = tf.argsort(scores_L, stable=True)
  sorted_length_L = tf.gather(word_length_L, order_L)
  taken_L = tf.zeros([length], tf.bool)
  remaining = budget
  for _ in range(_WHOLE_WORD_FILL_PASSES):
    candidate_L = ~taken_L & (sorted_length_L > 0) & (sorted_length_L <= remaining)
    running_L = tf.cumsum(tf.where(candidate_L, sorted_length_L, 0))
    take_L = candidate_L & (running_L <= remaining)
    taken_L |= take_L
    remaining -= tf.reduce_sum(tf.where(take_L, sorted_length_L, 0))
  # Back from random order to word order; index L (not a word) reads False.
  word_taken_L = tf.scatter_nd(order_L[:, None], taken_L, [length])
  return tf.gather(tf.concat([word_taken_L, [False]], axis=0), word_L)


def span_length_probabilities(geometric_p, max_span_length):
  """P(length = 1..max) of Geometric(p) truncated to [1, max] and renormalised (float64)."""
  lengths = np.arange(1, max_span_length + 1)
  weights = geometric_p * (1.0 - geometric_p) ** (lengths - 1)
  return weights / weights.sum()


# ALBERT's longest n-gram (in words).
NGRAM_MAX = 3


def ngram_length_probabilities(max_n=NGRAM_MAX):
  """P(n = 1..max_n) proportional to 1/n, ALBERT's n-gram length distribution (float64)."""
  weights = 1.0 / np.arange(1, max_n + 1)
  return weights / weights.sum()


def span_choice(input_ids_L, maskable_L, seed, config, length_probabilities=None):
  """The span strategy with its draws, for :func:`choose_span_positions` and for tests.

  Args:
    input_ids_L: int32 [L].
    maskable_L: bool [L].
    seed: int64 [2] stateless seed.
    config: a ``masking.MaskingConfig`` with ``continuation`` set.
    length_probabilities: P(length = 1, 2, ...) in words; None = the config's truncated
      geometric (`span_length_probabilities`).

  Returns:
    ``(chosen_L, lengths_K, num_drawn)``: the chosen positions; the K = P span lengths (words)
    drawn; how many of them the choice used (the spans taken whole plus the one cut to fit).
  """
  word_L, word_length_L, num_words, length, budget = _words_and_budget(
    input_ids_L, maskable_L, config
  )
  num_spans = config.max_predictions_per_seq  # Every span adds at least one token or ends it.
  length_seed, start_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
  if length_probabilities is None:
    length_probabilities = span_length_probabilities(
      config.span_geometric_p, config.max_span_length
    )
  cdf = np.cumsum(length_probabilities)
  draw_K = tf.random.stateless_uniform([num_spans], seed=length_seed, dtype=tf.float64)
  # Inverse CDF: the length is 1 + the number of CDF steps below the draw.
  lengths_K = 1 + tf.reduce_sum(
    tf.cast(draw_K[:, None] >= tf.constant(cdf[:-1])[None, :], tf.int32), axis=1
  )
  starts_K = tf.cast(
    tf.floor(
      tf.random.stateless_uniform([num_spans], seed=start_seed, dtype=tf.float64)
      * tf.cast(num_words, tf.float64)
    ),
    tf.int32,
  )
  word_W = tf.range(length)
  in_span_KW = (word_W[None, :] >= starts_K[:, None]) & (
    word_W[None, :] < tf.minimum(starts_K + lengths_K, num_words)[:, None]
  )
  # Words covered by spans 0..k and their token count, for every prefix k.
  covered_KW = tf.cumsum(tf.cast(in_span_KW, tf.int32), axis=0) > 0
  tokens_K = tf.reduce_sum(tf.where(covered_KW, word_length_L[None, :], 0), axis=1)
  num_whole = tf.reduce_sum(tf.cast(tokens_K <= budget, tf.int32))
  taken_W = tf.cond(
    num_whole > 0,
    lambda: covered_KW[tf.maximum(num_whole - 1, 0)],
    lambda: tf.zeros([length], tf.bool),
  )
  remaining = budget - tf.reduce_sum(tf.where(taken_W, word_length_L, 0))
  # The first span that does not fit keeps its new words, in order, while they fit.
  straddler = tf.minimum(num_whole, num_spans - 1)
  new_W = in_span_KW[straddler] & ~taken_W & (num_whole < num_spans)
  running_W = tf.cumsum(tf.where(new_W, word_length_L, 0))
  taken_W |= new_W & (running_W <= remaining)
  num_drawn = tf.minimum(num_whole + 1, num_spans)
  chosen_L = tf.gather(tf.concat([taken_W, [False]], axis=0), word_L)
  return chosen_L, lengths_K, num_drawn


def choose_span_positions(input_ids_L, maskable_L, seed, config):
  """Span strategy (SpanBERT): whole-word spans of geometric length up to the token budget.

  Args:
    input_ids_L: int32 [L].
    maskable_L: bool [L].
    seed: int64 [2] stateless seed.
    config: a ``masking.MaskingConfig`` with ``continuation`` set.

  Returns:
    bool [L]: the chosen positions; at most the budget of tokens.
  """
  return span_choice(input_ids_L, maskable_L, seed, config)[0]


def choose_ngram_positions(input_ids_L, maskable_L, seed, config):
  """N-gram strategy (ALBERT): whole-word n-grams, n <= 3 with P(n) ~ 1/n, up to the budget.

  Args:
    input_ids_L: int32 [L].
    maskable_L: bool [L].
    seed: int64 [2] stateless seed.
    config: a ``masking.MaskingConfig`` with ``continuation`` set.

  Returns:
    bool [L]: the chosen positions; at most the budget of tokens.
  """
  return span_choice(input_ids_L, maskable_L, seed, config, ngram_length_probabilities())[0]


POSITION_STRATEGIES = {
  "token": choose_token_positions,
  "whole_word": choose_whole_word_positions,
  "span": choose_span_positions,
  "ngram": choose_ngram_positions,
}
# Strategies that need to know where words start (``MaskingConfig.continuation``).
WORD_STRATEGIES = frozenset({"whole_word", "span", "ngram"})
