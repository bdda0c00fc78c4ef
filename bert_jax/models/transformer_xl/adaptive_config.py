"""Adaptive input and softmax of the transformer_xl family (``model.adaptive``; Baevski & Auli
2019, Grave et al. 2017), as transformers' ``AdaptiveEmbedding`` / ``ProjectedAdaptiveLogSoftmax``
define them.

``cutoffs`` split the vocabulary (ordered by frequency) into a head cluster ``[0, cutoffs[0])``
and tail clusters; the head's softmax also scores one entry per tail cluster, and a tail token's
log-probability is its cluster's head log-probability plus its log-probability within the
cluster. With ``div_val`` > 1 cluster i has its own table, ``embedding_size // div_val**i``
wide, projected to the model width; ``tie_projs[i]`` makes the softmax reuse cluster i's input
projection (the published ``transfo-xl-wt103``: cutoffs 20000, 40000, 200000, div_val 4,
tie_projs False, True, True, True).
"""

import dataclasses

from bert_jax import names
from bert_jax.config_fields import option
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class AdaptiveOptions:
  """Options of ``model.family='transformer_xl'`` (other families need the defaults)."""

  cutoffs: tuple = option(
    (),
    help="transformer_xl: increasing token ids where the adaptive softmax's clusters start "
    "after the head (transfo-xl-wt103: 20000, 40000, 200000); () = one softmax.",
    config_type=object,
  )
  div_val: int = option(
    1,
    help="transformer_xl: cluster i's tables are embedding_size // div_val**i wide; 1 = one "
    "table shared by the clusters.",
  )
  tie_projs: tuple = option(
    (),
    help="transformer_xl: per cluster (head first), whether the softmax reuses that cluster's "
    "input projection (transformers' tie_projs); () = none tied.",
    config_type=object,
  )

  def __post_init__(self):
    # JSON and ConfigDicts hand lists; the config must stay hashable (a static jit argument).
    object.__setattr__(self, "cutoffs", tuple(int(c) for c in self.cutoffs))
    object.__setattr__(self, "tie_projs", tuple(bool(t) for t in self.tie_projs))
    if any(b <= a for a, b in zip((0, *self.cutoffs), self.cutoffs)):
      raise UserInputError(
        f"model.adaptive.cutoffs={list(self.cutoffs)} must be positive and increasing "
        "(e.g. 20000, 40000, 200000)"
      )
    if self.div_val < 1:
      raise UserInputError(f"model.adaptive.div_val={self.div_val} must be >= 1 (1 = one table)")

  def check_model(self, config):
    """This section against the rest of ``config`` (a `ModelConfig`), and the keys family
    transformer_xl needs.

    Raises:
      UserInputError: as `check`, or a transformer_xl model that is not causal.
    """
    check(config)
    if config.family == names.TRANSFORMER_XL and not config.causal:
      raise UserInputError(
        "model.family='transformer_xl' is a causal LM (each token sees the memory, earlier "
        "tokens and itself); set model.causal=True"
      )


# The config section(s) of family transformer_xl (`family_spec.Family.sections`).
SECTIONS = {"adaptive": AdaptiveOptions}


def clusters(config):
  """[(first id, end id, table width)] per cluster of a `ModelConfig` (one without cutoffs)."""
  options = config.adaptive
  ends = (*options.cutoffs, config.vocab_size)
  starts = (0, *options.cutoffs)
  width = config.embedding_width
  return [
    (start, end, width // options.div_val**i) for i, (start, end) in enumerate(zip(starts, ends))
  ]


def tied_projection(config, cluster: int) -> bool:
  """Whether the softmax of ``cluster`` reuses an input projection (transformers' rule)."""
  options = config.adaptive
  return cluster < len(options.tie_projs) and options.tie_projs[cluster]


def check(config):
  """Validates ``model.adaptive`` against the rest of a `ModelConfig`.

  Raises:
    UserInputError: more tie_projs than clusters, adaptive clusters on another family, a
      cutoff past the vocabulary, or a cluster table narrower than one unit.
  """
  options = config.adaptive
  if len(options.tie_projs) > len(options.cutoffs) + 1:
    raise UserInputError(
      f"model.adaptive.tie_projs has {len(options.tie_projs)} entries for "
      f"{len(options.cutoffs) + 1} clusters; give at most one per cluster"
    )
  if not options.cutoffs and options.div_val == 1:
    return
  if config.family != names.TRANSFORMER_XL:
    raise UserInputError(
      f"model.adaptive (cutoffs {list(options.cutoffs)}, div_val {options.div_val}) is for "
      f"model.family='transformer_xl'; drop it for family {config.family!r}"
    )
  if options.cutoffs and options.cutoffs[-1] >= config.vocab_size:
    raise UserInputError(
      f"model.adaptive.cutoffs={list(options.cutoffs)} must all be below model.vocab_size="
      f"{config.vocab_size}"
    )
  if clusters(config)[-1][2] < 1:
    raise UserInputError(
      f"model.adaptive.div_val={options.div_val} leaves the last cluster's table "
      f"{config.embedding_width} // {options.div_val}**{len(options.cutoffs)} = 0 wide; "
      "lower div_val or use fewer cutoffs"
    )
