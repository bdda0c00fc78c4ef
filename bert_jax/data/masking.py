"""Dynamic masked-LM masking as a TensorFlow graph function, deterministic per example.

Every sequence is masked afresh each time it is read (RoBERTa's dynamic masking) from a
per-example stateless seed, so a given (seed, example) always gets the same mask on any host,
in any order, after any restart. Only ``tf.random.stateless_*`` ops are used.

Masking is two steps, so strategies can be added next to each other:

1. a *position strategy* picks which positions to predict (``token``, ``whole_word`` or
   ``span``, see ``mask_positions.POSITION_STRATEGIES``);
2. ``replace_chosen_tokens`` applies BERT's 80/10/10 rule to those positions: 80% become
   [MASK], 10% a random ordinary token, 10% stay as they are (``mask_token_prob`` and
   ``random_token_prob``; ELECTRA's generator sees 85% [MASK], 15% kept, no random tokens).
"""

import dataclasses

from bert_jax import environment
from bert_jax.data import mask_positions
from bert_jax.data.vocab_types import SpecialTokenIds
from bert_jax.errors import UserInputError

tf = environment.import_tensorflow_for_data()


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
  """What masked-LM masking needs to know.

  Attributes:
    max_predictions_per_seq: P, the static number of prediction slots per sequence.
    mask_prob: share of maskable tokens to predict (BERT: 0.15).
    vocab_size: entries in the vocab file; random replacements are drawn below it.
    special_ids: ids of [PAD], [UNK], [CLS], [SEP], [MASK].
    random_token_low: smallest id a random replacement may take (first ordinary token), so it
      never inserts [CLS], [SEP], [PAD], [MASK] or a reserved [unused..] entry.
    strategy: key of ``POSITION_STRATEGIES``.
    mask_token_prob: share of chosen positions replaced by [MASK].
    random_token_prob: share replaced by a random token; the rest keep the original token.
    continuation: per vocab id, True for pieces that continue the previous word (from the
      tokenizer's ``is_continuation()``, as a tuple); needed by ``whole_word`` and ``span``.
    span_geometric_p: ``span``: p of the geometric span-length distribution (SpanBERT: 0.2).
    max_span_length: ``span``: longest span in words (SpanBERT: 10).
  """

  max_predictions_per_seq: int
  mask_prob: float
  vocab_size: int
  special_ids: SpecialTokenIds
  random_token_low: int
  strategy: str = "token"
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1
  continuation: tuple[bool, ...] | None = dataclasses.field(default=None, repr=False)
  span_geometric_p: float = 0.2
  max_span_length: int = 10

  def __post_init__(self):
    if self.max_predictions_per_seq < 1:
      raise UserInputError(
        f"max_predictions_per_seq is {self.max_predictions_per_seq}; it must be >= 1 "
        "(BERT uses 20 at sequence length 128, 80 at 512)"
      )
    if not 0.0 < self.mask_prob <= 1.0:
      raise UserInputError(f"mask_prob is {self.mask_prob}; it must be in (0, 1] (BERT: 0.15)")
    if not 0 <= self.random_token_low < self.vocab_size:
      raise UserInputError(
        f"random_token_low is {self.random_token_low}; it must be in [0, vocab_size="
        f"{self.vocab_size})"
      )
    if (
      self.mask_token_prob < 0
      or self.random_token_prob < 0
      or (self.mask_token_prob + self.random_token_prob > 1.0)
    ):
      raise UserInputError(
        f"mask_token_prob={self.mask_token_prob} and random_token_prob="
        f"{self.random_token_prob} must be >= 0 and sum to at most 1"
      )
    if self.strategy not in POSITION_STRATEGIES:
      raise UserInputError(
        f"masking strategy {self.strategy!r} is unknown; choose one of "
        f"{sorted(POSITION_STRATEGIES)}"
      )
    if self.strategy in mask_positions.WORD_STRATEGIES and (
      self.continuation is None or len(self.continuation) != self.vocab_size
    ):
      raise UserInputError(
        f"masking strategy {self.strategy!r} needs `continuation` with one entry per vocab id "
        f"({self.vocab_size}); pass tuple(tokenizer.is_continuation())"
      )
    if not 0.0 < self.span_geometric_p <= 1.0 or self.max_span_length < 1:
      raise UserInputError(
        f"span_geometric_p={self.span_geometric_p} must be in (0, 1] and max_span_length="
        f"{self.max_span_length} at least 1 (SpanBERT: 0.2 and 10)"
      )


def masking_config_for(data_config, tokenizer, max_predictions_per_seq=None) -> MaskingConfig:
  """The `MaskingConfig` of a `PretrainingDataConfig` and the run's tokenizer.

  Args:
    data_config: the ``data`` section (mask shares, strategy, span lengths).
    tokenizer: the run's tokenizer (vocab size, special ids, word continuations).
    max_predictions_per_seq: P; None = ``data_config.max_predictions_per_seq``.
  """
  return MaskingConfig(
    max_predictions_per_seq=max_predictions_per_seq or data_config.max_predictions_per_seq,
    mask_prob=data_config.mask_prob,
    vocab_size=tokenizer.vocab_size,
    special_ids=tokenizer.special_ids,
    random_token_low=tokenizer.first_regular_id,
    strategy=data_config.masking,
    mask_token_prob=data_config.mask_token_prob,
    random_token_prob=data_config.random_token_prob,
    continuation=tuple(tokenizer.is_continuation().tolist()),
    span_geometric_p=data_config.span_geometric_p,
    max_span_length=data_config.max_span_length,
  )


maskable_positions = mask_positions.maskable_positions
num_to_predict = mask_positions.num_to_predict
choose_token_positions = mask_positions.choose_token_positions
POSITION_STRATEGIES = mask_positions.POSITION_STRATEGIES


def gather_chosen_positions(chosen_L, max_predictions_per_seq):
  """Turns a boolean choice into padded prediction slots.

  Args:
    chosen_L: bool [L], at most P True entries.
    max_predictions_per_seq: P.

  Returns:
    ``(positions_P, weights_P)``: int32 chosen positions in increasing order padded with 0,
    and float32 1.0 for real slots, 0.0 for padding.
  """
  length = tf.shape(chosen_L)[0]
  position_L = tf.range(length)
  # Chosen positions sort first (in order), the rest after them; P sentinels past the end
  # keep top_k valid when P > L.
  key_L = tf.where(chosen_L, position_L, length + position_L)
  key = tf.concat([key_L, 2 * length + tf.range(max_predictions_per_seq)], axis=0)
  positions_P = -tf.math.top_k(-key, k=max_predictions_per_seq, sorted=True).values
  real_P = positions_P < length
  return tf.where(real_P, positions_P, 0), tf.cast(real_P, tf.float32)


def replace_chosen_tokens(input_ids_L, positions_P, weights_P, seed, config):
  """BERT's 80/10/10 replacement (or the config's shares) at the chosen positions.

  Args:
    input_ids_L: int32 [L] original ids.
    positions_P: int32 [P] chosen positions (padding slots hold 0).
    weights_P: float32 [P], 1.0 for real slots.
    seed: int64 [2] stateless seed.
    config: a :class:`MaskingConfig`.

  Returns:
    int32 [L] ids with the chosen positions replaced.
  """
  choice_seed, token_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
  num_slots = config.max_predictions_per_seq
  draw_P = tf.random.stateless_uniform([num_slots], seed=choice_seed)
  random_ids_P = tf.random.stateless_uniform(
    [num_slots],
    seed=token_seed,
    minval=config.random_token_low,
    maxval=config.vocab_size,
    dtype=tf.int32,
  )
  original_P = tf.gather(input_ids_L, positions_P)
  new_P = tf.where(
    draw_P < config.mask_token_prob,
    config.special_ids.mask,
    tf.where(draw_P < config.mask_token_prob + config.random_token_prob, random_ids_P, original_P),
  )
  # Padding slots add zeros: real positions are distinct, so the sums are the new ids exactly.
  real_P = tf.cast(weights_P, tf.int32)
  length = tf.shape(input_ids_L)
  scattered_L = tf.scatter_nd(positions_P[:, None], new_P * real_P, length)
  replaced_L = tf.scatter_nd(positions_P[:, None], real_P, length) > 0
  return tf.where(replaced_L, scattered_L, input_ids_L)


def mask_example(input_ids_L, seed, config):
  """Masks one sequence for masked-LM training.

  Args:
    input_ids_L: int [L] token ids ([CLS]/[SEP]/[PAD] are never chosen).
    seed: int [2] stateless seed; the result is a pure function of (ids, seed, config).
    config: a :class:`MaskingConfig`.

  Returns:
    A dict: ``input_ids`` int32 [L] (masked), ``masked_lm_positions`` int32 [P],
    ``masked_lm_ids`` int32 [P] (original ids; 0 in padding slots), ``masked_lm_weights``
    float32 [P] (1.0 real, 0.0 padding slots).
  """
  input_ids_L = tf.cast(input_ids_L, tf.int32)
  seed = tf.cast(seed, tf.int64)
  position_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
  maskable_L = maskable_positions(input_ids_L, config.special_ids)
  choose = POSITION_STRATEGIES[config.strategy]
  chosen_L = choose(input_ids_L, maskable_L, position_seed, config)
  positions_P, weights_P = gather_chosen_positions(chosen_L, config.max_predictions_per_seq)
  masked_ids_L = replace_chosen_tokens(input_ids_L, positions_P, weights_P, replace_seed, config)
  return {
    "input_ids": masked_ids_L,
    "masked_lm_positions": positions_P,
    "masked_lm_ids": tf.gather(input_ids_L, positions_P) * tf.cast(weights_P, tf.int32),
    "masked_lm_weights": weights_P,
  }
