"""A BERT WordPiece vocab out of a Hugging Face ``tokenizer.json`` (the ``tokenizers`` format).

Models saved by transformers 5 ship ``tokenizer.json`` and no ``vocab.txt``. Its ``model``
holds the WordPiece vocab as {token: id}; its ``normalizer`` (a ``BertNormalizer``, alone or in
a ``Sequence``) says whether the model is uncased. `wordpiece_vocab` turns them into the
``vocab.txt`` lines (line number = id) and the lowercase flag that bert_jax's tokenizer takes.
"""

import json

from etils import epath

from bert_jax.errors import UserInputError


def _bert_normalizers(normalizer):
  if not isinstance(normalizer, dict):
    return []
  if normalizer.get("type") == "Sequence":
    return [n for child in normalizer.get("normalizers", []) for n in _bert_normalizers(child)]
  return [normalizer] if normalizer.get("type") == "BertNormalizer" else []


def wordpiece_vocab(path) -> tuple[list[str], bool | None]:
  """(tokens in id order, lowercase or None if the file does not say) of a tokenizer.json.

  Raises:
    UserInputError: the file is not JSON, its model is not WordPiece, or its ids are not
      exactly 0 .. size-1.
  """
  path = epath.Path(path)
  try:
    spec = json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise UserInputError(f"{path} is not valid JSON ({error}); re-save the tokenizer") from None
  model = spec.get("model", {}) if isinstance(spec, dict) else {}
  if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
    raise UserInputError(
      f"{path} holds a {model.get('type', 'unknown')} tokenizer, not BERT's WordPiece; "
      "pass --vocab=<vocab.txt> (or a SentencePiece .model) for this model"
    )
  vocab = model["vocab"]
  tokens = sorted(vocab, key=vocab.get)
  if [vocab[t] for t in tokens] != list(range(len(tokens))):
    raise UserInputError(
      f"{path}: the WordPiece ids are not 0..{len(tokens) - 1} without gaps; pass --vocab"
    )
  if any("\n" in t or "\r" in t for t in tokens):
    raise UserInputError(f"{path} has a token with a line break; it cannot be a vocab.txt line")
  bert = _bert_normalizers(spec.get("normalizer"))
  lowercase = bool(bert[0].get("lowercase", True)) if bert else None
  return tokens, lowercase
