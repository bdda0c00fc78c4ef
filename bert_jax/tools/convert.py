"""Converts weights: Hugging Face BERT-family models <-> bert_jax workdirs; TF BERT -> bert_jax.

  python -m bert_jax.tools.convert --from=hf --input=/models/bert-base-uncased \\
      --output=/runs/bert_base_hf
  python -m bert_jax.tools.convert --from=tf \\
      --input=/models/uncased_L-12_H-768_A-12/bert_model.ckpt \\
      --bert_config=/models/uncased_L-12_H-768_A-12/bert_config.json --output=/runs/bert_base_tf
  python -m bert_jax.tools.convert --to=hf --input=/runs/bert_base --output=/models/bert_base_hf
  python -m bert_jax.tools.convert --to=hf --input=/runs/bert_base --output=/models/bf16 \\
      --dtype=bfloat16 --max_shard_size=200MB
  python -m bert_jax.tools.convert --from=hf --input=/models/electra-small-discriminator \\
      --generator=/models/electra-small-generator --output=/runs/electra_small_hf

``--from`` writes a bert_jax workdir (config.json, vocab.txt, checkpoints/0/state) that
fine-tuning runs take as ``--config.init_from=<output>``. Hugging Face directories hold
config.json and model.safetensors (read without torch) or pytorch_model.bin (needs torch);
BertModel, BertForMaskedLM and BertForPreTraining checkpoints all convert, and so do
DistilBertModel and DistilBertForMaskedLM ones, ALBERT's (AlbertModel / AlbertForMaskedLM /
AlbertForPreTraining; one shared layer group or one group per layer), XLNet's (XLNetModel,
XLNetLMHeadModel), RoBERTa's / XLM-R's ((XLM)RobertaModel, (XLM)RobertaForMaskedLM, with
their vocab.json + merges.txt / sentencepiece.bpe.model; positions past the config's
pad_token_id) and XLM's (XLMModel, XLMWithLMHeadModel, languages from lang2id, with XLM's
vocab.json + merges.txt and do_lowercase_and_remove_accent): ``model_type`` in config.json
picks the family (`models/families.py`). ``--to=hf`` writes
config.json, model.safetensors, and vocab.txt + tokenizer_config.json when the run's vocab is a
WordPiece vocab.txt; ``transformers`` loads it as BertModel or BertForPreTraining (a
``distilbert`` run: DistilBertModel or DistilBertForMaskedLM). A fine-tuned
run's task heads are not exported (Hugging Face's task classes name them differently).

Sharded checkpoints (``model.safetensors.index.json`` + ``model-0000i-of-0000N.safetensors``)
and bf16 / f16 tensors are read as float32; ``--to=hf --dtype=bfloat16`` writes bf16 tensors and
``--max_shard_size=200MB`` writes shards with an index, both as transformers does. A directory
with ``tokenizer.json`` and no ``vocab.txt`` (transformers 5) converts with that file's
WordPiece vocab and lowercasing.

ELECTRA (config.json ``model_type: electra``): ``--input`` is the discriminator
(ElectraForPreTraining or ElectraModel), ``--generator`` the ElectraForMaskedLM trained with it
(its embeddings must equal the discriminator's: bert_jax stores them once); ``--to=hf`` writes
``<output>/discriminator`` and ``<output>/generator``. A generator alone (ElectraForMaskedLM as
``--input``, no ``--generator``: the electra-*-generator checkpoints) converts into an ELECTRA
workdir with ``model.electra.lone_generator=True`` (the generator is the trunk that fine-tuning
and ``embed`` read, and pretraining continues its masked LM); it exports back as one
ElectraForMaskedLM directory.

The TF import maps bert_config.json's ``"gelu"`` to the exact (erf) GELU, as Hugging Face does;
Google's TF code computes its tanh approximation, which differs by at most 5e-4 per value.
Bad input (missing files, another architecture, tensors that do not fit the config) prints one
``error:`` line and exits with status 2; an existing non-empty --output needs --overwrite.
"""

import json
import tempfile

from absl import flags, logging
from etils import epath

from bert_jax import environment
from bert_jax.cli import runner
from bert_jax.data import tokenization, tokenizer_json
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.attention import kinds as attention_kinds
from bert_jax.models.interop import hf_config, safetensors_files, tf_weights, weight_table
from bert_jax.tools import hf_model_dirs, hf_tokenizer_files, workdir_params

_TOKENIZER_JSON = "tokenizer.json"
_HF_VOCAB_FILES = (workdir_params.VOCAB_FILE, "vocab.json", "sentencepiece.bpe.model")


def _define_flags(flag_values: flags.FlagValues):
  define = {"flag_values": flag_values}
  flags.DEFINE_enum(
    "from", None, ["hf", "tf"], "Import weights of this format into a bert_jax workdir.", **define
  )
  flags.DEFINE_enum("to", None, ["hf"], "Export a bert_jax workdir to this format.", **define)
  flags.DEFINE_string(
    "input",
    None,
    "--from=hf: a Hugging Face model directory; --from=tf: "
    "the checkpoint prefix (.../bert_model.ckpt); --to=hf: a bert_jax "
    "workdir or checkpoints/<step> directory.",
    **define,
  )
  flags.DEFINE_string(
    "output", None, "Directory to write (a workdir, or a Hugging Face model directory).", **define
  )
  flags.DEFINE_string(
    "bert_config", None, "--from=tf: the bert_config.json of the checkpoint.", **define
  )
  flags.DEFINE_string(
    "vocab",
    None,
    "vocab.txt to ship with the model; default: the one "
    "beside the input (or the run's vocab for --to=hf).",
    **define,
  )
  flags.DEFINE_boolean(
    "lowercase",
    None,
    "Whether that vocab is uncased; default: tokenizer_config.json's do_lower_case, else True.",
    **define,
  )
  flags.DEFINE_string(
    "generator",
    None,
    "--from=hf of an ELECTRA discriminator (ElectraForPreTraining): the matching generator's "
    "(ElectraForMaskedLM) directory; without it the generator starts from scratch.",
    **define,
  )
  flags.DEFINE_boolean("overwrite", False, "Replace an existing non-empty --output.", **define)
  flags.DEFINE_enum(
    "dtype",
    "float32",
    list(safetensors_files.DTYPES),
    "--to=hf: dtype of the written tensors (bfloat16 halves the files).",
    **define,
  )
  flags.DEFINE_string(
    "max_shard_size",
    "",
    "--to=hf: split the weights into shards of at most this size (e.g. 5GB, 200MB) with a "
    "model.safetensors.index.json, as transformers does; empty = one model.safetensors.",
    **define,
  )


def _check_output(output: str, overwrite: bool, inputs):
  path = epath.Path(output)
  for source in inputs:
    if source and path.resolve() == epath.Path(source).resolve():
      raise UserInputError(f"--output={output} is the input; write to another directory")
  if path.exists() and (not path.is_dir() or any(path.iterdir())) and not overwrite:
    raise UserInputError(
      f"--output={output} exists and is not empty; pass --overwrite to "
      "replace it, or choose a new directory"
    )


def _fresh_output(output: str) -> epath.Path:
  """Empties ``output`` (checked by `_check_output` before any work) and returns it."""
  path = epath.Path(output)
  if path.is_dir():
    path.rmtree()
  elif path.exists():
    path.unlink()
  path.mkdir(parents=True)
  return path


def _vocab(vocab_flag, default_path):
  """--vocab if given (it must exist), else ``default_path`` if that file exists, else None."""
  if vocab_flag:
    if not epath.Path(vocab_flag).exists():
      raise UserInputError(f"--vocab={vocab_flag} does not exist; pass the model's vocab.txt")
    return vocab_flag
  return str(default_path) if default_path and epath.Path(default_path).exists() else None


def _vocab_beside(directory):
  """The model's vocab in a Hugging Face directory: BERT's vocab.txt, RoBERTa's vocab.json
  (+ merges.txt) or XLM-R's sentencepiece.bpe.model; vocab.txt's path if none exists."""
  for name in _HF_VOCAB_FILES:
    if (directory / name).exists():
      return directory / name
  return directory / workdir_params.VOCAB_FILE


def _log_vocab(vocab_path, model):
  if vocab_path is None:
    logging.warning("no vocab.txt found; pass --vocab so tools can tokenise for this model")
    return
  if vocab_path.endswith((".json", ".model")):
    lines = tokenization.load_tokenizer(vocab_path).vocab_size
  else:
    with open(vocab_path, encoding="utf-8") as f:
      lines = sum(1 for _ in f)
  if lines != model.vocab_size:
    logging.warning(
      "%s has %d entries but the model's vocab_size is %d", vocab_path, lines, model.vocab_size
    )


def from_hf(
  input_dir: str, output: str, *, vocab=None, lowercase=None, overwrite=False, generator=None
):
  """Hugging Face directory -> bert_jax workdir (see the module docstring)."""
  _check_output(output, overwrite, [input_dir, generator])
  directory = epath.Path(input_dir)
  if not directory.is_dir():
    raise UserInputError(
      f"--input={input_dir} is not a directory; pass a Hugging Face model "
      "directory with config.json and model.safetensors"
    )
  model, params, weights_path = hf_model_dirs.read_model(directory, generator)
  vocab_path = _vocab(vocab, _vocab_beside(directory))
  tokenizer_config = directory / "tokenizer_config.json"
  if lowercase is None and tokenizer_config.exists():
    settings = hf_model_dirs.read_json(tokenizer_config, "it must hold the tokenizer's settings")
    lowercase = settings.get("do_lower_case") if isinstance(settings, dict) else None
    if lowercase is None and isinstance(settings, dict):  # XLMTokenizer's name for it.
      lowercase = settings.get("do_lowercase_and_remove_accent")
  with tempfile.TemporaryDirectory() as scratch:
    if vocab_path is None and (directory / _TOKENIZER_JSON).exists():
      # transformers 5 saves tokenizer.json only: its WordPiece vocab becomes vocab.txt.
      tokens, json_lowercase = tokenizer_json.wordpiece_vocab(directory / _TOKENIZER_JSON)
      vocab_path = str(epath.Path(scratch) / workdir_params.VOCAB_FILE)
      epath.Path(vocab_path).write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
      lowercase = json_lowercase if lowercase is None else lowercase
    _log_vocab(vocab_path, model)
    workdir_params.write_converted(
      _fresh_output(output),
      params,
      model,
      source=f"hf:{directory.resolve()}",
      vocab_path=vocab_path,
      lowercase=True if lowercase is None else bool(lowercase),
    )
  print(f"wrote workdir {output} ({', '.join(sorted(params))}) from {weights_path}")


def _tf_reader(checkpoint: str):
  environment.quiet_tensorflow()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  try:
    reader = tf.train.load_checkpoint(checkpoint)
  except (tf.errors.OpError, ValueError) as error:
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    reason = reason.replace(str(checkpoint), "it")  # TensorFlow repeats the path.
    raise UserInputError(
      f"no readable TF checkpoint at --input={checkpoint} ({reason}); "
      "pass the prefix of bert_model.ckpt.index / .data-*"
    ) from None
  return reader


def from_tf(
  checkpoint: str, bert_config: str, output: str, *, vocab=None, lowercase=None, overwrite=False
):
  """Original TF BERT checkpoint -> bert_jax workdir (see the module docstring)."""
  _check_output(output, overwrite, [checkpoint])
  if not bert_config:
    raise UserInputError("--from=tf needs --bert_config=.../bert_config.json")
  model = hf_config.model_config_from_bert_config(
    hf_model_dirs.read_json(epath.Path(bert_config), "pass the checkpoint's bert_config.json"),
    bert_config,
  )
  reader = _tf_reader(checkpoint)
  params = tf_weights.params_from_tf(
    reader.get_variable_to_shape_map(),
    reader.get_tensor,
    model,
    source=checkpoint,
    our_shapes=weight_table.param_shapes(families.get(model.family).pretraining_model, model),
  )
  vocab_path = _vocab(vocab, epath.Path(checkpoint).parent / workdir_params.VOCAB_FILE)
  _log_vocab(vocab_path, model)
  workdir_params.write_converted(
    _fresh_output(output),
    params,
    model,
    source=f"tf:{epath.Path(checkpoint).resolve()}",
    vocab_path=vocab_path,
    lowercase=True if lowercase is None else lowercase,
  )
  print(f"wrote workdir {output} ({', '.join(sorted(params))}) from {checkpoint}")


def to_hf(
  workdir: str,
  output: str,
  *,
  vocab=None,
  lowercase=None,
  overwrite=False,
  dtype="float32",
  max_shard_size="",
):
  """bert_jax workdir or checkpoint -> Hugging Face directory (see the module docstring).

  ``dtype`` (float32 | bfloat16 | float16) is the tensors' dtype in the files; a
  ``max_shard_size`` such as "200MB" splits them into shards with an index, as transformers'
  ``save_pretrained(max_shard_size=...)`` does.
  """
  _check_output(output, overwrite, [workdir])
  if max_shard_size:
    safetensors_files.parse_size(max_shard_size)  # A bad size fails before any work.
  run = workdir_params.read_run(workdir)
  model = run.model
  if model.reversible or attention_kinds.get(model.attention_kind).approximate:
    raise UserInputError(
      f"{workdir} holds a model with attention_kind={model.attention_kind!r}, reversible="
      f"{model.reversible}; Hugging Face BERT has dense attention in post-LN layers only"
    )
  params = weight_table.unscanned(run.params, model)
  # {subdirectory ("" = --output itself): (config.json object, state)}.
  directories, rows = families.hf_interop(model.family, workdir).write(params, model)
  left_out = sorted(set(weight_table.flatten(params)) - {row.ours for row in rows})
  if left_out:
    logging.warning("not exported (no Hugging Face name): %s", ", ".join(left_out))
  run_vocab_path, run_lowercase = workdir_params.run_vocab(run)
  vocab_path = _vocab(vocab, run_vocab_path)
  lowercase = run_lowercase if lowercase is None else lowercase
  root = _fresh_output(output)
  max_shard_bytes = safetensors_files.parse_size(max_shard_size) if max_shard_size else 0
  for subdirectory, (config, state) in directories.items():
    if dtype != "float32":
      config["torch_dtype"] = dtype  # from_pretrained(..., torch_dtype="auto") loads it so.
    directory = root / subdirectory
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    safetensors_files.write_state(directory, state, dtype=dtype, max_shard_bytes=max_shard_bytes)
    hf_tokenizer_files.write(
      directory, vocab_path, lowercase, model.max_position_embeddings, config
    )
    print(
      f"wrote {directory} ({config['architectures'][0]}, {len(state)} tensors) from {run.step_dir}"
    )


def _convert(values: flags.FlagValues):
  source, target = values["from"].value, values["to"].value
  if (source is None) == (target is None):
    raise UserInputError("pass exactly one of --from=hf|tf (import) and --to=hf (export)")
  for name in ("input", "output"):
    if not values[name].value:
      raise UserInputError(f"--{name} is required")
  common = {
    "vocab": values["vocab"].value,
    "lowercase": values["lowercase"].value,
    "overwrite": values["overwrite"].value,
  }
  if source == "hf":
    from_hf(
      values["input"].value, values["output"].value, generator=values["generator"].value, **common
    )
  elif source == "tf":
    from_tf(values["input"].value, values["bert_config"].value, values["output"].value, **common)
  else:
    to_hf(
      values["input"].value,
      values["output"].value,
      dtype=values["dtype"].value,
      max_shard_size=values["max_shard_size"].value,
      **common,
    )


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _convert, argv)


if __name__ == "__main__":
  raise SystemExit(main())
