"""Contextual embeddings of lines of text from a bert_jax workdir, saved as ``.npz``.

  python -m bert_jax.tools.embed --checkpoint=/runs/bert_base --input=lines.txt \\
      --output=embeddings.npz --layers=-1,-2 --pooling=none --attention

Each input line is one example; ``text_a ||| text_b`` is a sentence pair (segments A and B,
the convention of the original BERT's extract_features.py). An example becomes
``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``, truncated to --max_seq_length tokens (the
longer segment loses its last tokens first), tokenised with the run's vocab (config.json's
``data`` section; --vocab overrides). Lines run in batches of --batch_size, all padded to the
longest example, so the model compiles once; results do not depend on the batch size.

Arrays in the .npz (N lines, L the longest example, K = len(--layers), D the hidden size):

  layers           [K] hidden-state index: 0 = embedding output, i = output of layer i
                   (--layers counts from the top when negative: -1 = last layer).
  lengths          [N] tokens of each example.
  input_ids, token_type_ids  [N, L] int32, 0 past the end; tokens [N, L] strings, "" there.
  embeddings       float32; --pooling=none: [N, K, L, D], 0 past the end; cls: [N, K, D],
                   the hidden state at [CLS]; mean: [N, K, D], the mean over the example's
                   tokens ([CLS] and [SEP] included).
  attention        with --attention: [N, num_layers, heads, L, L] float32 softmax weights;
                   row q is token q's attention over the keys (it sums to 1 over the
                   example's tokens); rows past the end are 0 (not for xlnet, transformer_xl).
  documents        with --memory_across_lines: [N] int32 document of each example.

An XLM model with several languages needs --language (a ``lang2id`` name): every token gets
that language's embedding, as transformers' ``langs`` argument gives it.

xlnet and transformer_xl (`embed_recurrent.py`) can carry their memory across the lines of a
document (--memory_across_lines); transformer_xl examples are a line's tokens alone.
"""

import dataclasses
import functools
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from etils import epath

from bert_jax.cli import runner
from bert_jax.data import tokenization
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.attention import kinds as attention_kinds
from bert_jax.models.blocks import EncoderBlock
from bert_jax.models.config import ModelConfig
from bert_jax.models.embeddings import Embeddings
from bert_jax.models.interop import weight_table
from bert_jax.tools import embed_examples, embed_recurrent, model_languages, workdir_params
from bert_jax.tools.embed_examples import Features

POOLINGS = ("none", "cls", "mean")


# The modules whose outputs are hidden states: the embeddings (factorised: their projection to
# H), each layer's block, and what the family adds (`Family.hidden_state_modules`).
_PROJECTION = "embedding_projection"


def _layer_output_test(family_modules: tuple):
  """The ``capture_intermediates`` predicate of the family's hidden-state modules."""
  modules = (Embeddings, EncoderBlock, *family_modules)

  def is_layer_output(module, method_name: str) -> bool:
    if method_name != "__call__":
      return False
    return isinstance(module, modules) or module.name == _PROJECTION

  return is_layer_output


def _captured(tree, key):
  """Every value stored under ``key`` anywhere in ``tree``, in call order: a module applied
  several times (ALBERT's shared layer) holds one entry per application."""
  for name, node in tree.items():
    if name == key:
      yield from node
    elif isinstance(node, Mapping):
      yield from _captured(node, key)


@functools.partial(jax.jit, static_argnames=("model", "layers", "with_attention"))
def _forward(
  params,
  input_ids_BL,
  token_type_ids_BL,
  input_mask_BL,
  language_ids_BL=None,
  *,
  model: ModelConfig,
  layers: tuple,
  with_attention: bool,
):
  """Hidden states [B, K, L, D] of ``layers`` (and attention [B, layers, H, L, L]), float32."""
  family = families.get(model.family)
  languages = {} if language_ids_BL is None else {"language_ids_BL": language_ids_BL}
  _, state = family.encoder(model).apply(
    {"params": params},
    input_ids_BL,
    token_type_ids_BL,
    input_mask_BL,
    **languages,
    capture_intermediates=_layer_output_test(family.hidden_state_modules),
    mutable=["intermediates"],
    rngs={"hashing": jax.random.key(0)},
  )
  captured = state["intermediates"]
  embedded = captured[_PROJECTION] if _PROJECTION in captured else captured["embeddings"]
  hidden = [embedded["__call__"][0], *_captured(captured["encoder"], "__call__")]
  real_BL = (input_mask_BL > 0).astype(jnp.float32)
  hidden_BKLD = jnp.stack([hidden[k].astype(jnp.float32) for k in layers], axis=1)
  outputs = {"hidden": hidden_BKLD * real_BL[:, None, :, None]}
  if with_attention:
    probs_BNHLL = jnp.stack(list(_captured(captured["encoder"], "attention_probs")), axis=1)
    outputs["attention"] = probs_BNHLL * real_BL[:, None, None, :, None]
  return outputs


def resolve_layers(spec: str, num_layers: int) -> tuple:
  """Hidden-state indices (0 = embeddings .. num_layers) of a comma-separated --layers value."""
  try:
    requested = [int(part) for part in spec.split(",") if part.strip()]
  except ValueError:
    raise UserInputError(
      f"--layers={spec!r} must be comma-separated integers, e.g. -1,-2"
    ) from None
  if not requested:
    raise UserInputError("--layers is empty; name at least one layer, e.g. -1")
  for layer in requested:
    if not -(num_layers + 1) <= layer <= num_layers:
      raise UserInputError(
        f"--layers has {layer}, but the model has hidden states 0 "
        f"(embeddings) to {num_layers} (or -1 to -{num_layers + 1})"
      )
  return tuple(layer % (num_layers + 1) for layer in requested)


def embed_features(
  params,
  model: ModelConfig,
  features: Features,
  *,
  layers: tuple,
  pooling: str = "none",
  with_attention: bool = False,
  batch_size: int = 32,
  documents=None,
  mem_len: int = 0,
  language: str = "",
) -> dict:
  """Runs the encoder over ``features`` in batches; returns the .npz arrays (see module doc).

  Args:
    params: the ``bert`` params of the run (unscanned layout), numpy or jax arrays.
    model: its model config.
    features: from `embed_examples.examples`.
    layers: hidden-state indices from `resolve_layers`.
    pooling: "none", "cls" or "mean".
    with_attention: also return the attention weights of every layer.
    batch_size: examples per model call.
    documents: xlnet, transformer_xl: [N] document of each example, to carry the memory
      across a document's lines (`embed_recurrent`); None embeds each example alone.
    mem_len: memory positions with ``documents`` (0 = the model's ``mem_len``).
    language: the examples' language, for a model with language embeddings (XLM's, a
      ``lang2id`` name; `model_languages.language_id_of`); "" for other models.
  """
  language_id = model_languages.language_id_of(model, language)
  if model.reversible:
    raise UserInputError("embed runs BERT's post-LN layers; this run has model.reversible=True")
  # An approximate kind keeps its own function; every other kind is run as "dense" (the same
  # function, with probabilities to show).
  approximate = attention_kinds.get(model.attention_kind).approximate
  if with_attention and approximate:
    raise UserInputError(
      f"--attention needs dense attention; this run's attention_kind is "
      f"{model.attention_kind!r}, which forms no full attention matrix"
    )
  if families.get(model.family).has_memory:
    embed_recurrent.check_options(model, pooling, with_attention)
    hidden_NKLD = embed_recurrent.hidden_states(
      params, model, features, layers, batch_size, documents, mem_len
    )
    return _arrays(features, layers, pooling, hidden_NKLD)
  model = dataclasses.replace(
    model,
    scan_layers=False,
    remat_policy="none",
    attention_kind=model.attention_kind if approximate else "dense",
  )
  count, length = features.input_ids.shape
  padded = -(-count // batch_size) * batch_size

  def pad(x_NL):  # Whole batches only: one compiled shape for every call.
    return np.pad(x_NL, ((0, padded - count), (0, 0)))

  input_mask = pad((np.arange(length)[None, :] < features.lengths[:, None]).astype(np.int32))
  input_ids, token_type_ids = pad(features.input_ids), pad(features.token_type_ids)
  language_ids = None if language_id is None else np.full_like(input_ids, language_id)
  params = jax.device_put(params)
  batches = []
  for start in range(0, padded, batch_size):
    rows = slice(start, start + batch_size)
    batches.append(
      jax.device_get(
        _forward(
          params,
          input_ids[rows],
          token_type_ids[rows],
          input_mask[rows],
          None if language_ids is None else language_ids[rows],
          model=model,
          layers=layers,
          with_attention=with_attention,
        )
      )
    )
  arrays = _arrays(
    features, layers, pooling, np.concatenate([b["hidden"] for b in batches])[:count]
  )
  if with_attention:
    arrays["attention"] = np.concatenate([b["attention"] for b in batches])[:count]
  return arrays


def _arrays(features: Features, layers: tuple, pooling: str, hidden_NKLD) -> dict:
  """The .npz arrays of the module docstring, but tokens and attention."""
  if pooling == "cls":
    embeddings = hidden_NKLD[:, :, 0]
  elif pooling == "mean":
    embeddings = hidden_NKLD.sum(axis=2) / features.lengths[:, None, None].astype(np.float32)
  else:
    embeddings = hidden_NKLD
  return {
    "layers": np.array(layers, np.int32),
    "lengths": features.lengths,
    "input_ids": features.input_ids,
    "token_type_ids": features.token_type_ids,
    "embeddings": embeddings,
  }


def _define_flags(flag_values: flags.FlagValues):
  define = {"flag_values": flag_values}
  flags.DEFINE_string("checkpoint", None, "A bert_jax workdir (or checkpoints/<step>).", **define)
  flags.DEFINE_string(
    "input", None, "UTF-8 text, one example per line ('a ||| b' = pair).", **define
  )
  flags.DEFINE_string("output", None, "The .npz file to write.", **define)
  flags.DEFINE_string(
    "layers",
    "-1",
    "Hidden states to keep, comma-separated: 0 = embeddings, i = layer i, negative = from the top.",
    **define,
  )
  flags.DEFINE_enum(
    "pooling",
    "none",
    list(POOLINGS),
    "none: every token; cls: the [CLS] token; mean: the mean over the example's tokens.",
    **define,
  )
  flags.DEFINE_boolean("attention", False, "Also save every layer's attention weights.", **define)
  flags.DEFINE_string("vocab", None, "vocab.txt / .model; default: the run's.", **define)
  flags.DEFINE_boolean("lowercase", None, "Uncased vocab; default: the run's setting.", **define)
  flags.DEFINE_integer(
    "max_seq_length",
    0,
    "Tokens per example at most; 0 = the model's max_position_embeddings.",
    **define,
  )
  flags.DEFINE_integer("batch_size", 32, "Examples per model call.", **define)
  flags.DEFINE_boolean(
    "memory_across_lines",
    False,
    "xlnet, transformer_xl: each line attends to the memory of the lines before it in its "
    "document (blank lines separate documents and are not examples).",
    **define,
  )
  flags.DEFINE_integer(
    "mem_len", 0, "Memory positions with --memory_across_lines; 0 = the run's.", **define
  )
  flags.DEFINE_string(
    "language",
    "",
    "xlm: the language of the lines (a lang2id name, e.g. en), whose embedding each token gets; "
    "needed when the model has several.",
    **define,
  )


def run_tokenizer(values, run: workdir_params.Run):
  """The run's tokenizer, or the one --vocab / --lowercase (flags named so) ask for.

  Args:
    values: parsed flags with ``checkpoint``, ``vocab`` and ``lowercase``.
    run: the workdir's `workdir_params.Run`.
  """
  vocab_path, lowercase = workdir_params.run_vocab(run)
  vocab_path = values["vocab"].value or vocab_path
  if vocab_path is None:
    raise UserInputError(
      f"the run in {values['checkpoint'].value} records no vocab; pass --vocab=vocab.txt"
    )
  if values["lowercase"].value is not None:
    lowercase = values["lowercase"].value
  return tokenization.load_model_tokenizer(
    vocab_path, lowercase=lowercase, model_vocab_size=run.model.vocab_size, vocab_flag="--vocab"
  )


def _embed(values: flags.FlagValues):
  for name in ("checkpoint", "input", "output"):
    if not values[name].value:
      raise UserInputError(f"--{name} is required")
  input_path = epath.Path(values["input"].value)
  if not input_path.is_file():
    raise UserInputError(
      f"--input={input_path} is not a file; pass a text file, one example per line"
    )
  lines = input_path.read_text(encoding="utf-8").splitlines()
  if not lines:
    raise UserInputError(f"--input={input_path} is empty")
  if values["batch_size"].value < 1:
    raise UserInputError(f"--batch_size={values['batch_size'].value} must be at least 1")
  run = workdir_params.read_run(values["checkpoint"].value, flag="--checkpoint")
  max_positions = run.model.max_position_embeddings
  max_seq_length = values["max_seq_length"].value or max_positions
  if not 3 <= max_seq_length <= max_positions:
    raise UserInputError(
      f"--max_seq_length={max_seq_length} must be in [3, "
      f"{max_positions}] (the model's max_position_embeddings)"
    )
  tokenizer = run_tokenizer(values, run)
  features, documents = embed_examples.examples(
    lines,
    tokenizer,
    max_seq_length,
    families.get(run.model.family),
    values["memory_across_lines"].value,
  )
  params = weight_table.unscanned(run.params, run.model)["bert"]
  arrays = embed_features(
    params,
    run.model,
    features,
    layers=resolve_layers(values["layers"].value, run.model.num_layers),
    pooling=values["pooling"].value,
    with_attention=values["attention"].value,
    batch_size=values["batch_size"].value,
    documents=documents,
    mem_len=values["mem_len"].value,
    language=values["language"].value,
  )
  if documents is not None:
    arrays["documents"] = documents
  tokens = [
    tokenizer.convert_ids_to_tokens(ids[:n]) for ids, n in zip(features.input_ids, features.lengths)
  ]
  width = features.input_ids.shape[1]
  arrays["tokens"] = np.array([row + [""] * (width - len(row)) for row in tokens], dtype=str)
  output = epath.Path(values["output"].value)
  output.parent.mkdir(parents=True, exist_ok=True)
  with output.open("wb") as f:
    np.savez(f, **arrays)
  print(f"wrote {output}: {len(lines)} examples, embeddings {arrays['embeddings'].shape}")


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _embed, argv)


if __name__ == "__main__":
  raise SystemExit(main())
