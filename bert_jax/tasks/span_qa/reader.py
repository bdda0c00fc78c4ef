"""Reads SQuAD v1.1 / v2.0 questions: SQuAD JSON files and the TFDS ``squad`` dataset.

SQuAD JSON: ``{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}], "is_impossible", "plausible_answers"}]}]}]}``; v1.1 files
have no ``is_impossible``. An answer's ``answer_start`` is a character index into the context
and must select exactly its text: a file where it does not is rejected, naming the entry, since
a shifted answer would train the model on the wrong span. ``plausible_answers`` (v2.0's spans
for unanswerable questions) are checked the same way but, as in the original BERT and the
official evaluation, neither trained on nor scored.

TFDS ``squad/v1.1`` and ``squad/v2.0`` hold the same fields, one example per question; they are
read only when prepared locally (``tfds build squad/v2.0 --data_dir=DIR``), never downloaded.
"""

import dataclasses
import json

from bert_jax.data import files, tfds_source
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """One question about one context.

  Attributes:
    qid: the question's id (the key of predictions and of the official evaluation).
    question: the question text.
    context: the paragraph the answer comes from.
    answer_texts: every gold answer (several for dev sets); empty for unanswerable questions.
    answer_starts: the character index of each answer in ``context``.
    is_impossible: SQuAD 2.0's unanswerable question.
  """

  qid: str
  question: str
  context: str
  answer_texts: tuple[str, ...]
  answer_starts: tuple[int, ...]
  is_impossible: bool = False


def _check_answer(where, context, text, start):
  """Raises if ``context[start:start+len(text)]`` is not ``text``."""
  if not isinstance(text, str) or not text or isinstance(start, bool) or not isinstance(start, int):
    raise UserInputError(
      f"{where}: an answer needs a non-empty 'text' and an integer "
      f"'answer_start', got text={text!r} answer_start={start!r}"
    )
  found = context[start : start + len(text)] if start >= 0 else ""
  if found != text:
    raise UserInputError(
      f"{where}: answer_start {start} selects {found!r} from the context but the answer text "
      f"is {text!r}; fix answer_start to the answer's character index in the context"
    )


def make_example(where, *, qid, question, context, answers, is_impossible, plausible_answers):
  """A validated :class:`SquadExample`; ``where`` names the entry in error messages.

  Args:
    where: "file: entry" prefix of error messages.
    qid: the question id.
    question: the question text.
    context: its paragraph.
    answers: (text, answer_start) pairs.
    is_impossible: unanswerable (SQuAD 2.0).
    plausible_answers: (text, answer_start) pairs of an unanswerable question (checked only).

  Raises:
    UserInputError: an empty field, an answer that does not match the context, answers on an
      unanswerable question or none on an answerable one.
  """
  for name, value in (("id", qid), ("question", question), ("context", context)):
    if not isinstance(value, str) or not value.strip():
      raise UserInputError(f"{where}: {name!r} must be a non-empty string, got {value!r}")
  for text, start in tuple(answers) + tuple(plausible_answers):
    _check_answer(where, context, text, start)
  if is_impossible and answers:
    raise UserInputError(
      f"{where}: is_impossible is true but the question has answers; "
      "move them to plausible_answers or set is_impossible to false"
    )
  if not is_impossible and not answers:
    raise UserInputError(
      f"{where}: the question has no answers and is not marked "
      "is_impossible; add an answer or set is_impossible to true (SQuAD 2.0)"
    )
  return SquadExample(
    qid=qid,
    question=question,
    context=context,
    answer_texts=tuple(t for t, _ in answers),
    answer_starts=tuple(s for _, s in answers),
    is_impossible=is_impossible,
  )


def _field(where, record, key, kind):
  """``record[key]`` checked to be a ``kind``; a one-line error naming the entry otherwise."""
  if not isinstance(record, dict) or key not in record:
    raise UserInputError(
      f"{where} lacks the {key!r} field; SQuAD JSON is "
      "data[].paragraphs[].qas[] with context, id, question and answers"
    )
  value = record[key]
  if not isinstance(value, kind):
    raise UserInputError(
      f"{where}: {key!r} must be a JSON {kind.__name__}, got {type(value).__name__}"
    )
  return value


def _answer_pairs(where, qa, key):
  pairs = []
  for i, answer in enumerate(_field(where, qa, key, list) if key in qa else ()):
    entry = f"{where}.{key}[{i}]"
    if not isinstance(answer, dict) or "text" not in answer or "answer_start" not in answer:
      raise UserInputError(f"{entry} needs 'text' and 'answer_start'")
    pairs.append((answer["text"], answer["answer_start"]))
  return pairs


def read_squad_json(path):
  """Reads a SQuAD v1.1 or v2.0 JSON file.

  Args:
    path: the file (UTF-8 JSON), local or on any filesystem TensorFlow knows (``gs://``).

  Returns:
    A list of :class:`SquadExample` in file order.

  Raises:
    FileNotFoundError: the file does not exist.
    UserInputError: not JSON, a missing or mistyped field, an answer_start that does not match
      its text, a repeated question id, or no questions at all (the message names the entry).
  """
  try:
    root = json.loads(files.read_text(path))  # Local or gs://.
  except FileNotFoundError:
    raise FileNotFoundError(
      f"SQuAD file {path} does not exist; set data.train_path / data.eval_path to SQuAD JSON "
      "files (train-v1.1.json, dev-v2.0.json, ...)"
    ) from None
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise UserInputError(
      f"SQuAD file {path} is not UTF-8 JSON ({e}); pass the train-*.json / "
      "dev-*.json files of SQuAD or files in their format"
    ) from None
  examples, seen = [], {}
  for a, article in enumerate(_field(f"{path}: the top level", root, "data", list)):
    for p, paragraph in enumerate(_field(f"{path}: data[{a}]", article, "paragraphs", list)):
      where = f"{path}: data[{a}].paragraphs[{p}]"
      context = _field(where, paragraph, "context", str)
      for q, qa in enumerate(_field(where, paragraph, "qas", list)):
        entry = f"{where}.qas[{q}]"
        qid = _field(entry, qa, "id", str)
        entry = f"{entry} (id {qid!r})"
        if qid in seen:
          raise UserInputError(
            f"{entry}: the id is used twice (also {seen[qid]}); question ids must be unique"
          )
        seen[qid] = entry
        impossible = _field(entry, qa, "is_impossible", bool) if "is_impossible" in qa else False
        examples.append(
          make_example(
            entry,
            qid=qid,
            question=_field(entry, qa, "question", str),
            context=context,
            answers=_answer_pairs(entry, qa, "answers"),
            is_impossible=impossible,
            plausible_answers=_answer_pairs(entry, qa, "plausible_answers"),
          )
        )
  if not examples:
    raise UserInputError(f"SQuAD file {path} holds no questions")
  return examples


def _decode(value):
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _tfds_pairs(answers):
  return [(_decode(t), int(s)) for t, s in zip(answers["text"], answers["answer_start"])]


def read_squad_tfds(name, *, split, data_dir=""):
  """Reads one split of a locally prepared TFDS ``squad`` dataset.

  Args:
    name: "squad/v1.1" or "squad/v2.0" (a version suffix such as "squad/v2.0:3.0.0" allowed).
    split: "train" or "validation" (TFDS slicing allowed).
    data_dir: TFDS data folder; empty = TFDS's default.

  Returns:
    A list of :class:`SquadExample` in the split's stored order.

  Raises:
    UserInputError: the dataset is not prepared (with the ``tfds build`` command), a bad split,
      or an example whose answer does not match its context.
  """
  _, records = tfds_source.open_split(name, split=split, data_dir=data_dir)
  examples = []
  for i, record in enumerate(records):
    qid = _decode(record["id"])
    examples.append(
      make_example(
        f"TFDS {name}[{split}] example {i} (id {qid!r})",
        qid=qid,
        question=_decode(record["question"]),
        context=_decode(record["context"]),
        answers=_tfds_pairs(record["answers"]),
        is_impossible=bool(record.get("is_impossible", False)),
        plausible_answers=_tfds_pairs(record["plausible_answers"])
        if "plausible_answers" in record
        else (),
      )
    )
  if not examples:
    raise UserInputError(f"TFDS dataset {name!r} split {split!r} holds no questions")
  return examples
