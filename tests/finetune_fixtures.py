"""Shared fine-tuning test fixtures: a tiny pretrained model and small learnable task files.

`PRETRAINED_MODEL` is the model section of the session-wide ``tiny_pretrained_workdir`` fixture
(tests/conftest.py): fine-tuning tests pass `model_flags()` (or `model_overrides()` for
in-process configs) so their model restores from it.
"""

import csv
import importlib.util
import pathlib

import numpy as np

from bert_jax.data import default_corpus, text_corpus
from bert_jax.default_config import base_config
from bert_jax.train.loop import train_and_evaluate
from tests import helpers

# BERT-tiny's shape (L=2, H=128, A=2, I=512) over the embedded 8192-entry vocab, with room for
# 128-token fine-tuning sequences.
PRETRAINED_MODEL = {
  "model.size": "tiny",
  "model.vocab_size": 8192,
  "model.max_position_embeddings": 128,
}
_GLUE_CONFIG = pathlib.Path(__file__).resolve().parents[1] / "configs" / "finetune" / "glue.py"


def model_overrides():
  """{"model.<key>": value} that make a config's model the pretrained fixture's."""
  return dict(PRETRAINED_MODEL)


def model_flags():
  """The same as `--config.model.<key>=<value>` flags for `python -m bert_jax.main`."""
  return [f"--config.{key}={value}" for key, value in PRETRAINED_MODEL.items()]


def short_run(init_from, train_path, eval_path, steps):
  """Overrides of a ``steps``-step fine-tuning run from ``init_from`` on fixture files: one
  log, eval and checkpoint at the end."""
  return {
    "init_from": str(init_from),
    "num_train_epochs": 0.0,
    "num_train_steps": steps,
    "log_every_steps": steps,
    "eval_every_steps": steps,
    "checkpoint_every_steps": steps,
    "data.train_path": train_path,
    "data.eval_path": eval_path,
  }


def glue_config(task, overrides=None):
  """configs/finetune/glue.py's config for ``task`` ("mrpc"), with dotted-key ``overrides`` set."""
  spec = importlib.util.spec_from_file_location("glue_config", _GLUE_CONFIG)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return set_keys(module.get_config(task), overrides or {})


def short_mrpc_config(init_from, directory, *, num_train, num_eval, steps, max_seq_length=64):
  """glue.py:mrpc fine-tuning ``init_from`` for ``steps`` steps of 8 rows on MRPC-format files
  (``num_train`` / ``num_eval`` pairs) written in ``directory``."""
  train, dev = write_mrpc_files(directory, num_train=num_train, num_eval=num_eval)
  overrides = {
    **short_run(init_from, train, dev, steps),
    "global_batch_size": 8,
    "peak_flops_per_device": 1e12,
    "data.max_seq_length": max_seq_length,
  }
  return glue_config("mrpc", overrides)


def set_keys(config, overrides):
  """Sets dotted keys ("data.max_seq_length") of a ConfigDict in place; returns it."""
  for key, value in overrides.items():
    node = config
    *parents, leaf = key.split(".")
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  return config


def pretrain_tiny(workdir, num_train_steps=40, **overrides):
  """Pretrains the fixture model (MLM + NSP on the embedded corpus) into ``workdir``.

  ``overrides``: more {"dotted.key": value}, e.g. another ``model.family``.
  """
  config = set_keys(
    base_config(),
    dict(
      PRETRAINED_MODEL,
      num_train_steps=num_train_steps,
      global_batch_size=16,
      log_every_steps=num_train_steps,
      eval_every_steps=num_train_steps,
      checkpoint_every_steps=num_train_steps,
      peak_flops_per_device=1e12,  # MFU's denominator without measuring the host's peak.
      **{
        "data.max_seq_length": 64,
        "data.max_predictions_per_seq": 10,
        "data.num_eval_examples": 16,
        "optimizer.learning_rate": 1e-3,
        "optimizer.warmup_steps": 4,
        **overrides,
      },
    ),
  )
  train_and_evaluate(config, str(workdir), helpers.one_device())
  return workdir


def corpus_sentences(min_words=6, max_words=24):
  """The embedded corpus's sentences of a moderate length, as (document index, words) pairs."""
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())
  return [
    (d, sentence.split())
    for d, document in enumerate(documents)
    for sentence in document
    if min_words <= len(sentence.split()) <= max_words
  ]


def _split_by_document(sentences, eval_share=0.25):
  """Train and eval sentences from disjoint documents (no sentence leaks into eval)."""
  eval_documents = {d for d, _ in sentences if d % round(1 / eval_share) == 0}
  return (
    [s for s in sentences if s[0] not in eval_documents],
    [s for s in sentences if s[0] in eval_documents],
  )


def _paraphrase_pairs(sentences, count, rng):
  """(sentence 1, sentence 2, overlap) triples, half of each kind:

  * a sentence and a shortened copy of it (a random 30-80% of its words kept, in order);
    ``overlap`` is the share kept;
  * a sentence and an unrelated one (another document's, at least as long); ``overlap`` 0.

  Both cues (shared words, a shorter second sentence) are visible in the text, so a tiny
  model fine-tuned for a few dozen steps separates the kinds.
  """
  by_length = sorted(range(len(sentences)), key=lambda i: len(sentences[i][1]))
  triples = []
  for i in rng.choice(len(sentences), size=count, replace=len(sentences) < count):
    document, words = sentences[i]
    if rng.random() < 0.5:
      longer = [
        j
        for j in by_length[-len(by_length) // 4 :]
        if sentences[j][0] != document and len(sentences[j][1]) >= len(words)
      ]
      other = sentences[longer[rng.integers(len(longer))]] if longer else sentences[i - 1]
      triples.append((" ".join(words), " ".join(other[1]), 0.0))
      continue
    kept = np.sort(
      rng.choice(len(words), size=max(1, round(rng.uniform(0.3, 0.8) * len(words))), replace=False)
    )
    triples.append((" ".join(words), " ".join(words[k] for k in kept), len(kept) / len(words)))
  return triples


def write_mrpc_files(directory, num_train=512, num_eval=128, seed=0):
  """MRPC-layout train.tsv / dev.tsv: "Quality" 1 when #2 is an edited copy of #1.

  Returns:
    (train path, eval path) as strings.
  """
  rng = np.random.default_rng(seed)
  train, evaluation = _split_by_document(corpus_sentences())
  header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
  paths = []
  for name, sentences, count in (
    ("train.tsv", train, num_train),
    ("dev.tsv", evaluation, num_eval),
  ):
    lines = [
      f"{int(overlap > 0)}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\n"
      for i, (a, b, overlap) in enumerate(_paraphrase_pairs(sentences, count, rng))
    ]
    path = pathlib.Path(directory) / name
    path.write_text("\ufeff" + header + "".join(lines), encoding="utf-8")  # MRPC has a BOM.
    paths.append(str(path))
  return tuple(paths)


def write_stsb_files(directory, num_train=512, num_eval=128, seed=1):
  """STS-B-layout train.tsv / dev.tsv: "score" = 5 x the share of sentence1's words that
  sentence2 keeps (0 for an unrelated sentence)."""
  rng = np.random.default_rng(seed)
  train, evaluation = _split_by_document(corpus_sentences())
  header = (
    "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
  )
  paths = []
  for name, sentences, count in (
    ("train.tsv", train, num_train),
    ("dev.tsv", evaluation, num_eval),
  ):
    lines = [
      f"{i}\tmain-wiki\twiki\t2024\t{i}\tnone\tnone\t{a}\t{b}\t{5 * overlap:.3f}\n"
      for i, (a, b, overlap) in enumerate(_paraphrase_pairs(sentences, count, rng))
    ]
    path = pathlib.Path(directory) / name
    path.write_text(header + "".join(lines), encoding="utf-8")
    paths.append(str(path))
  return tuple(paths)


# Tags of the CoNLL fixture: a word's tag follows from the word itself, so it is learnable
# from the (uncased) text.
_WORD_TAGS = {
  **dict.fromkeys(("the", "a", "an"), "DET"),
  **dict.fromkeys(("of", "in", "on", "at", "by", "for", "with", "from"), "PREP"),
}


def _conll_tag(word):
  if word.isdigit():
    return "B-NUM"
  tag = _WORD_TAGS.get(word.lower())
  return f"B-{tag}" if tag else "O"


def write_conll_files(directory, num_train=384, num_eval=96):
  """CoNLL-2003-layout train.txt / eval.txt (word POS chunk NER columns, blank lines between
  sentences, -DOCSTART- lines): NER tags B-DET / B-PREP for articles and prepositions, B-NUM
  for numbers, O otherwise."""
  train, evaluation = _split_by_document(corpus_sentences())
  paths = []
  for name, sentences in (("train.txt", train[:num_train]), ("eval.txt", evaluation[:num_eval])):
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _, words in sentences:
      words = [w.strip(".,;:()\"'") or w for w in words]
      lines += [f"{w} NN I-NP {_conll_tag(w)}" for w in words] + [""]
    path = pathlib.Path(directory) / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    paths.append(str(path))
  return tuple(paths)


def write_swag_files(directory, num_train=256, num_eval=64, seed=2):
  """SWAG-layout train.csv / val.csv (sent1, sent2, ending0..3, label): sent2 is the context's
  first word, the right ending the rest of a shortened copy of the context, the three wrong
  ones unrelated longer sentences."""
  rng = np.random.default_rng(seed)
  train, evaluation = _split_by_document(corpus_sentences())
  paths = []
  for name, sentences, count in (
    ("train.csv", train, num_train),
    ("val.csv", evaluation, num_eval),
  ):
    triples = _paraphrase_pairs(sentences, 8 * count, rng)
    right = [(a, b) for a, b, overlap in triples if overlap > 0]
    wrong = [b for _, b, overlap in triples if overlap == 0]
    path = pathlib.Path(directory) / name
    with path.open("w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label"])
      for i, (context, copy) in enumerate(right[:count]):
        first, *rest = copy.split()
        endings = wrong[3 * i : 3 * i + 3]
        label = int(rng.integers(4))
        endings.insert(label, " ".join(rest) or first)
        writer.writerow([context, first, *endings, label])
    paths.append(str(path))
  return tuple(paths)
