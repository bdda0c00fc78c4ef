"""Reads a locally prepared TensorFlow Datasets (TFDS) text split into documents of sentences.

Each example's text field is one document: its lines are paragraphs, split into sentences by
the same splitter as ``create_pretraining_data --input_format=paragraphs``. The result has the
shape of ``text_corpus.read_documents``, so tokenising, pairing, masking, the eval split, host
sharding and exact resume are those of the text source.

Nothing is ever downloaded: training hosts often have no network, and a half-finished download
on several hosts at once is worse than a clear error. Prepare the dataset once where there is
network (``tfds build NAME --data_dir=DIR``) and point ``data.tfds_data_dir`` at ``DIR``.

Every process reads the whole split (in the stored order, files unshuffled), as the text source
reads every file: the pairing and the eval split are computed from all documents, so every host
must see the same ones.
"""

from absl import logging

from bert_jax.data import sentences
from bert_jax.errors import UserInputError

# Examples read between progress log lines (a Wikipedia split has millions of documents).
_LOG_EVERY = 100_000


def check_config(config):
  """Checks the ``tfds_*`` fields of a ``PretrainingDataConfig``.

  Raises:
    UserInputError: a bad count, an empty split or text key, or TFDS and TFRecords both set.
  """
  if config.tfds_max_documents < 0:
    raise UserInputError(
      f"data.tfds_max_documents is {config.tfds_max_documents}; use 0 (all) or a count >= 1"
    )
  if not config.tfds_name:
    return
  if config.tfrecord_pattern:
    raise UserInputError(
      f"data.tfds_name={config.tfds_name!r} and data.tfrecord_pattern="
      f"{config.tfrecord_pattern!r} are both set; keep one of the two sources"
    )
  if not config.tfds_split or not config.tfds_text_key:
    raise UserInputError(
      f"data.tfds_split={config.tfds_split!r} and data.tfds_text_key="
      f"{config.tfds_text_key!r} must both be set when data.tfds_name is (e.g. 'train', 'text')"
    )


def documents_for_config(config):
  """:func:`read_documents` with the ``tfds_*`` fields of a ``PretrainingDataConfig``."""
  return read_documents(
    config.tfds_name,
    split=config.tfds_split,
    text_key=config.tfds_text_key,
    data_dir=config.tfds_data_dir,
    max_documents=config.tfds_max_documents,
  )


def _load_builder(tfds, name, data_dir):
  """The prepared builder of ``name``; a UserInputError if it is unknown or not prepared."""
  root = data_dir or tfds.core.constants.get_default_data_dir()
  missing = UserInputError(
    f"TFDS dataset {name!r} is not prepared in {root}; prepare it once on a machine with "
    f"network (`tfds build {name} --data_dir={root}` or tfds.builder({name!r}, "
    f"data_dir={root!r}).download_and_prepare()), or set data.tfds_data_dir to the folder "
    "that holds it"
  )
  try:
    builder = tfds.builder(name, data_dir=data_dir or None)
  except ValueError as e:
    # DatasetNotFoundError (a ValueError) for names neither registered nor found in `root`;
    # its message lists every known dataset over many lines, so it is not passed on.
    raise missing from e
  if not builder.is_prepared():
    raise missing
  return builder


def open_split(
  name, *, split, data_dir="", check=None, decode_only=(), max_examples=0, split_key=""
):
  """Opens one split of a locally prepared TFDS dataset; every TFDS reader goes through here.

  Pretraining text and the fine-tuning tasks' readers thereby refuse a dataset that is not
  prepared, or a split it lacks, with the same messages.

  Args:
    name: TFDS name, with config and version if wanted (e.g. "glue/mrpc", "squad/v2.0").
    split: the split, TFDS slicing allowed (e.g. "train[:10%]").
    data_dir: TFDS data folder; empty = TFDS's default (``TFDS_DATA_DIR`` or
      ``~/tensorflow_datasets``).
    check: called with the builder before the split is opened; it raises a UserInputError
      when the dataset's features do not fit the reader.
    decode_only: decode only these features (skips images or other features some datasets
      carry); empty = all.
    max_examples: at most this many examples (the first ones); 0 = all.
    split_key: the config key that named ``split``, for the error message.

  Returns:
    ``(builder, examples)``: the builder (``builder.info`` describes the features) and an
    iterable of the split's examples as numpy dicts, in stored order (files unshuffled).

  Raises:
    UserInputError: the dataset is not prepared, or has no split ``split``.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  builder = _load_builder(tfds, name, data_dir)
  if check is not None:
    check(builder)
  decoders = (
    tfds.decode.PartialDecoding({key: True for key in decode_only}) if decode_only else None
  )
  try:
    dataset = builder.as_dataset(split=split, shuffle_files=False, decoders=decoders)
  except (KeyError, ValueError) as e:
    action = f"set {split_key} to" if split_key else "use"
    raise UserInputError(
      f"TFDS dataset {name!r} has no split {split!r}; {action} one of "
      f"{sorted(builder.info.splits.keys())} (slices such as 'train[:10%]' allowed)"
    ) from e
  if max_examples:
    dataset = dataset.take(max_examples)
  return builder, tfds.as_numpy(dataset)


def read_documents(name, *, split="train", text_key="text", data_dir="", max_documents=0):
  """Reads one split of a prepared TFDS dataset into documents of sentences.

  Args:
    name: TFDS name, with config and version if wanted (e.g. "wikipedia/20230601.en").
    split: split to read, TFDS slicing allowed (e.g. "train" or "train[:10%]").
    text_key: the string feature that holds each document's text.
    data_dir: TFDS data folder; empty = TFDS's default (``TFDS_DATA_DIR`` or
      ``~/tensorflow_datasets``).
    max_documents: read at most this many examples; 0 reads the whole split.

  Returns:
    A list of documents in the split's stored order, each a list of sentence strings; examples
    with no text are skipped.

  Raises:
    UserInputError: the dataset is not prepared, the split or text key does not exist, the
      text key is not a string feature, or the split holds no text.
  """

  def check(builder):
    features = builder.info.features
    if text_key not in features:
      raise UserInputError(
        f"TFDS dataset {name!r} has no feature {text_key!r}; set data.tfds_text_key to one "
        f"of {sorted(features.keys())}"
      )

  _, examples = open_split(
    name,
    split=split,
    data_dir=data_dir,
    check=check,
    decode_only=(text_key,),
    max_examples=max_documents,
    split_key="data.tfds_split",
  )
  documents = []
  num_examples = 0
  for example in examples:
    text = example[text_key]
    if not isinstance(text, bytes):
      raise UserInputError(
        f"feature {text_key!r} of TFDS dataset {name!r} is not a single string per example; "
        "set data.tfds_text_key to a text feature"
      )
    num_examples += 1
    # TFDS stores Text features as UTF-8; "replace" keeps one bad byte from ending the run.
    paragraphs = text.decode("utf-8", errors="replace").splitlines()
    document = [
      sentence for paragraph in paragraphs for sentence in sentences.split_sentences(paragraph)
    ]
    if document:
      documents.append(document)
    if num_examples % _LOG_EVERY == 0:
      logging.info("read %d examples of TFDS %s[%s]", num_examples, name, split)
  if not documents:
    raise UserInputError(
      f"TFDS dataset {name!r} split {split!r} feature {text_key!r} holds no text; check "
      "data.tfds_split and data.tfds_text_key"
    )
  logging.info(
    "read %d documents, %d sentences from %d examples of TFDS %s[%s]",
    len(documents),
    sum(len(d) for d in documents),
    num_examples,
    name,
    split,
  )
  return documents
