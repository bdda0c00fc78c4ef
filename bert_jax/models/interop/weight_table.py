"""Name tables between bert_jax parameters and other BERT implementations' tensors.

A `Row` pairs one bert_jax parameter with one foreign tensor and says how the layouts differ;
Hugging Face (`hf_weights`) and the original TF BERT (`tf_weights`) are two such tables. The
engine here checks a whole checkpoint against a table at once (missing, unexpected and
mis-shaped tensors in one message) and converts in both directions without touching values,
so a round trip is bitwise exact.

Tensors come in groups: the embeddings + encoder are required; the pooler, the masked-LM head
and the NSP head are each optional but complete when present (``BertModel`` checkpoints have no
heads, ``BertForMaskedLM`` ones no pooler and no NSP head).
"""

import dataclasses
import functools
from collections.abc import Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig

REQUIRED_GROUP = "encoder"


@dataclasses.dataclass(frozen=True)
class Row:
  """One bert_jax parameter and the foreign tensor holding it.

  Attributes:
    ours: the parameter's path in the params tree, ``/``-separated.
    theirs: the foreign tensor's name.
    group: "encoder" (embeddings and layers, always required), "pooler", "mlm_head" or
      "nsp_head" (each optional, but complete when present).
    heads_axis: axis of our array where [heads, head_dim] appear; the foreign tensor has
      them merged into one axis (bert_jax keeps attention projections per head).
    transpose: the foreign tensor is the (merged, 2-D) array transposed (PyTorch Linear
      weights are [out, in]).
  """

  ours: str
  theirs: str
  group: str
  heads_axis: int | None = None
  transpose: bool = False


# The parameters of one encoder layer (`models/blocks.py`'s `EncoderBlock`, which BERT, ALBERT,
# ELECTRA and DistilBERT share), in the order `encoder_layer_rows` pairs them with a foreign
# layout's names: (bert_jax suffix, heads_axis).
ENCODER_LAYER_PARAMS = (
  ("attention/query/kernel", 1),
  ("attention/query/bias", 0),
  ("attention/key/kernel", 1),
  ("attention/key/bias", 0),
  ("attention/value/kernel", 1),
  ("attention/value/bias", 0),
  ("attention/output/kernel", 0),
  ("attention/output/bias", None),
  ("attention_norm/scale", None),
  ("attention_norm/bias", None),
  ("intermediate/kernel", None),
  ("intermediate/bias", None),
  ("output/kernel", None),
  ("output/bias", None),
  ("output_norm/scale", None),
  ("output_norm/bias", None),
)


# BERT's embeddings (`models/embeddings.py`) and masked-LM head (`models/heads.py`), in the
# order `named_rows` pairs them with a foreign layout's names.
EMBEDDING_PARAMS = (
  "word_embeddings/embedding",
  "position_embeddings/embedding",
  "token_type_embeddings/embedding",
  "layer_norm/scale",
  "layer_norm/bias",
)
MLM_HEAD_PARAMS = (
  "transform/kernel",
  "transform/bias",
  "transform_norm/scale",
  "transform_norm/bias",
  "output_bias",
)


def named_rows(ours_prefix: str, params, foreign_names, group: str, *, transposed: bool = True):
  """Rows of ``params`` (our suffixes) under ``ours_prefix``, paired in order with
  ``foreign_names``; a None name skips the param (DistilBERT has no token-type table).

  Args:
    ours_prefix: e.g. ``"bert/embeddings/"``.
    params: `EMBEDDING_PARAMS`, `MLM_HEAD_PARAMS` or another tuple of suffixes.
    foreign_names: their full names, one per param.
    group: the rows' group.
    transposed: the foreign layout stores dense kernels as [out, in] (PyTorch ``Linear``).
  """
  if len(foreign_names) != len(params):
    raise ValueError(f"{len(foreign_names)} foreign names for {len(params)} params")
  return [
    Row(ours_prefix + ours, theirs, group, transpose=transposed and ours.endswith("/kernel"))
    for ours, theirs in zip(params, foreign_names)
    if theirs is not None
  ]


def renamed(rows, theirs: Mapping[str, str], groups: Mapping[str, str] = None):
  """``rows`` of another layout of the same parameters: each foreign name's first prefix found
  in ``theirs`` (in its order) replaced by its value; ours and the groups renamed by the
  ``groups`` mapping (a group's name is also its params' first path part, e.g. ``nsp_head``).
  """
  groups = groups or {}
  out = []
  for row in rows:
    old = next((prefix for prefix in theirs if row.theirs.startswith(prefix)), "")
    name = theirs[old] + row.theirs[len(old) :] if old else row.theirs
    group = groups.get(row.group, row.group)
    ours = group + row.ours[len(row.group) :] if row.group in groups else row.ours
    out.append(dataclasses.replace(row, ours=ours, theirs=name, group=group))
  return out


def by_head(head_class: str, trunk_class: str, head: str = "mlm_head"):
  """params -> the ``transformers`` class that loads them with nothing missing: ``head_class``
  when they hold ``head``, else ``trunk_class``."""
  return lambda params: head_class if head in params else trunk_class


def encoder_layer_rows(layers, foreign_names, *, transposed: bool, group: str = REQUIRED_GROUP):
  """Rows of encoder layers in a foreign layout.

  Args:
    layers: (our prefix, their prefix) per stored layer, e.g. ``("bert/encoder/layer_0/",
      "bert.encoder.layer.0.")``.
    foreign_names: the foreign suffixes of `ENCODER_LAYER_PARAMS`, in its order.
    transposed: the foreign layout stores dense kernels as [out, in] (PyTorch ``Linear``).
    group: the rows' group.
  """
  if len(foreign_names) != len(ENCODER_LAYER_PARAMS):
    raise ValueError(f"{len(foreign_names)} foreign names for {len(ENCODER_LAYER_PARAMS)} params")
  return [
    Row(
      ours_prefix + ours,
      theirs_prefix + theirs,
      group,
      heads_axis,
      transposed and ours.endswith("/kernel"),
    )
    for ours_prefix, theirs_prefix in layers
    for (ours, heads_axis), theirs in zip(ENCODER_LAYER_PARAMS, foreign_names)
  ]


def _merged_shape(row: Row, shape) -> tuple:
  shape = tuple(shape)
  if row.heads_axis is None:
    return shape
  axis = row.heads_axis
  return shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2 :]


def their_shape(row: Row, our_shape) -> tuple:
  """The foreign tensor's shape for one of ours."""
  merged = _merged_shape(row, our_shape)
  return merged[::-1] if row.transpose else merged


def to_theirs(row: Row, array: np.ndarray) -> np.ndarray:
  merged = array.reshape(_merged_shape(row, array.shape))
  return merged.T if row.transpose else merged


def to_ours(row: Row, array: np.ndarray, our_shape) -> np.ndarray:
  return (array.T if row.transpose else array).reshape(our_shape)


def module_shapes(module: nn.Module) -> dict:
  """{"bert/encoder/layer_0/...": shape} of the params ``module`` creates when called on
  (ids, ids, ids + 1) of shape [1, 2] (every family's model signature)."""
  ids = jnp.zeros((1, 2), jnp.int32)
  rngs = {"params": jax.random.key(0), "hashing": jax.random.key(0)}
  boxed = jax.eval_shape(lambda: module.init(rngs, ids, ids, ids + 1))
  flat = flatten(nn.unbox(boxed)["params"])
  return {path: tuple(leaf.shape) for path, leaf in flat.items()}


@functools.lru_cache(maxsize=8)
def param_shapes(model: type[nn.Module], config: ModelConfig) -> dict:
  """{"bert/encoder/layer_0/...": shape} of ``model`` (a family's pretraining model class, as
  its `family_spec.Family` record names it) built for ``config``, unscanned layout."""
  config = dataclasses.replace(
    config, scan_layers=False, remat_policy="none", attention_kind="dense"
  )
  return module_shapes(model(config))


def _examples(names, count=3, separator=", "):
  names = sorted(names)
  more = f" and {len(names) - count} more" if len(names) > count else ""
  return separator.join(names[:count]) + more


def import_params(
  rows,
  their_shapes: Mapping[str, tuple],
  read: Callable[[str], np.ndarray],
  config: ModelConfig,
  *,
  source: str,
  our_shapes: Mapping[str, tuple],
  ignored=frozenset(),
):
  """Checks a foreign checkpoint against ``rows`` and returns bert_jax params (numpy, float32).

  Args:
    rows: the `Row` table for ``config``.
    their_shapes: name -> shape of every tensor in the checkpoint.
    read: name -> array, called only once everything checks out.
    config: the model the checkpoint must fit.
    source: the checkpoint's path, for the message.
    our_shapes: path -> shape of the bert_jax params (`param_shapes`).
    ignored: names of tensors that are known and deliberately not converted.

  Returns:
    Nested dict of params of the groups the checkpoint holds.

  Raises:
    UserInputError: one line listing missing, unexpected and mis-shaped tensors.
  """
  present = {row.group for row in rows if row.theirs in their_shapes} | {REQUIRED_GROUP}
  wanted = [row for row in rows if row.group in present]
  missing = [row.theirs for row in wanted if row.theirs not in their_shapes]
  known = {row.theirs for row in rows} | set(ignored)
  unexpected = [name for name in their_shapes if name not in known]
  mismatched = []
  for row in wanted:
    expected = their_shape(row, our_shapes[row.ours])
    if row.theirs in their_shapes and tuple(their_shapes[row.theirs]) != expected:
      mismatched.append(f"{row.theirs} {tuple(their_shapes[row.theirs])}, config: {expected}")
  problems = []
  if missing:
    problems.append(f"{len(missing)} missing ({_examples(missing)})")
  if unexpected:
    problems.append(f"{len(unexpected)} unexpected ({_examples(unexpected)})")
  if mismatched:
    problems.append(
      f"{len(mismatched)} of another shape than the config implies "
      f"({_examples(mismatched, 2, '; ')})"
    )
  if problems:
    raise UserInputError(
      f"{source} does not fit its {config.family} config: tensors {'; '.join(problems)}; "
      "convert a checkpoint with its own config"
    )
  flat = {
    row.ours: to_ours(row, np.asarray(read(row.theirs), np.float32), our_shapes[row.ours])
    for row in wanted
  }
  return traverse_util.unflatten_dict(flat, sep="/")


def import_state(rows, tensors: Mapping, config: ModelConfig, **kwargs):
  """`import_params` for a state dict already in memory (name -> array), keyword args as there."""
  shapes = {name: tuple(np.shape(value)) for name, value in tensors.items()}
  return import_params(rows, shapes, tensors.__getitem__, config, **kwargs)


def flatten(params) -> dict:
  """{"bert/encoder/layer_0/...": leaf} of a nested params dict."""
  return traverse_util.flatten_dict(params, sep="/")


def export_params(rows, params) -> dict:
  """Foreign name -> numpy array for every row whose parameter ``params`` (unscanned) holds."""
  flat = flatten(params)
  return {
    row.theirs: np.asarray(to_theirs(row, np.asarray(flat[row.ours])))
    for row in rows
    if row.ours in flat
  }


def unscanned(params, config: ModelConfig):
  """The params of a ``scan_layers`` run with layer i under ``encoder/layer_<i>`` again."""
  if not config.scan_layers:
    return params
  flat = flatten(params)
  out = {}
  for path, value in flat.items():
    prefix, found, leaf = path.partition("encoder/layers/block/")
    if not found:
      out[path] = value
      continue
    for i in range(config.num_layers):
      out[f"{prefix}encoder/layer_{i}/{leaf}"] = np.asarray(value)[i]
  return traverse_util.unflatten_dict(out, sep="/")


def fold_tied_copies(tensors: dict, tied: dict, source: str, family: str):
  """Checks a state dict's tied copies (``{copy name: original name}``) in place.

  A copy whose original is absent stands in for it; a copy that differs from its original is
  refused, since bert_jax stores tied tensors once.

  Raises:
    UserInputError: a copy differs from its original.
  """
  for copy, original in tied.items():
    if copy not in tensors:
      continue
    if original not in tensors:
      tensors[original] = tensors[copy]
    elif not np.array_equal(np.asarray(tensors[copy]), np.asarray(tensors[original])):
      raise UserInputError(
        f"{source}: {copy} differs from {original}; {family} ties them and bert_jax stores "
        "them once, so this checkpoint cannot be converted"
      )
