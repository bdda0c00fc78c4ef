"""Which attention heads track syntax: accuracy per relation, general behaviour, pictures.

  python -m bert_jax.tools.analyze_attention --checkpoint=/runs/bert_base \\
      --conllu=en_ewt-ud-dev.conllu --output_dir=/tmp/attention

The analysis of Clark et al. (2019), "What Does BERT Look At?", on any workdir whose model
forms softmax attention (converted Hugging Face checkpoints included) and a parsed CoNLL-U
treebank (Universal Dependencies). Each sentence runs alone as ``[CLS] words [SEP]``; its
token attention becomes word attention (`attention_analysis/word_maps.py`: attention to a
split word is summed over its tokens, attention from it averaged; special tokens take no
part). For every layer, head, relation and direction the accuracy of the most-attended other
word is compared with the fixed-offset baseline (`attention_analysis/relations.py`); every
head's general behaviour is measured too (`attention_analysis/head_stats.py`).

Writes into --output_dir (layers and heads numbered from 1):

  analysis.json      everything: per relation and direction a [layers][heads] accuracy grid
                     and the baseline, the general statistics' grids, the best heads.
  heads.csv          one row per layer and head: statistics, then relation accuracies.
  summary.txt        the best head per relation beside the baseline (also printed),
                     for the relations with at least --min_count dependencies.
  relations/<relation>.png     layers x heads accuracy grids, both directions (the same
                     relations).
  statistics/<statistic>.png   layers x heads grid of each general statistic.
  heatmaps/sentence<S>_head<L>-<H>.png   word-by-word attention of the chosen sentences
                     (--heatmap_sentences) and heads (--heatmap_heads).

Sentences longer than the model's positions are skipped and counted (one line says how many).
"""

import dataclasses
import importlib.util
import sys

import numpy as np
from absl import flags
from etils import epath
from tqdm import tqdm

from bert_jax.cli import runner
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.interop import weight_table
from bert_jax.tools import embed, workdir_params
from bert_jax.tools.attention_analysis import (
  attention_maps,
  conllu,
  head_stats,
  relations,
  report,
  word_maps,
)

# Heatmaps drawn by default: the best heads of this many of the most frequent relations.
_DEFAULT_HEATMAP_RELATIONS = 4


def _define_flags(flag_values: flags.FlagValues):
  define = {"flag_values": flag_values}
  flags.DEFINE_string("checkpoint", None, "A bert_jax workdir (or checkpoints/<step>).", **define)
  flags.DEFINE_string(
    "conllu", None, "A CoNLL-U treebank with HEAD and DEPREL (Universal Dependencies).", **define
  )
  flags.DEFINE_string("output_dir", None, "Where the tables and pictures go.", **define)
  flags.DEFINE_string("vocab", None, "vocab.txt / .model; default: the run's.", **define)
  flags.DEFINE_boolean("lowercase", None, "Uncased vocab; default: the run's setting.", **define)
  flags.DEFINE_integer("batch_size", 16, "Sentences per model call.", **define)
  flags.DEFINE_integer("max_sentences", 0, "Analyse the first N sentences; 0 = all.", **define)
  flags.DEFINE_list(
    "heatmap_sentences", ["1"], "Sentences (1 = the file's first) to draw heatmaps of.", **define
  )
  flags.DEFINE_list(
    "heatmap_heads",
    [],
    "Heads to draw as layer-head from 1, e.g. 8-10,8-11; empty = the best heads of the "
    f"{_DEFAULT_HEATMAP_RELATIONS} most frequent relations.",
    **define,
  )
  flags.DEFINE_integer(
    "min_count",
    1,
    "Relations with fewer dependencies get no picture and no summary line (analysis.json and "
    "heads.csv keep every relation).",
    **define,
  )
  flags.DEFINE_boolean("progress", True, "Show a progress bar over the sentences.", **define)


@dataclasses.dataclass(frozen=True)
class _Request:
  """The checked flags."""

  checkpoint: str
  conllu: str
  output_dir: epath.Path
  batch_size: int
  max_sentences: int
  min_count: int
  heatmap_sentences: tuple  # 0-based.
  heatmap_heads: tuple  # 0-based (layer, head).


def _positive_list(values, flag: str, parts: int) -> tuple:
  """Each value of a list flag as ``parts`` dash-separated integers from 1, made 0-based."""
  parsed = []
  for value in values:
    try:
      numbers = tuple(int(part) - 1 for part in value.split("-"))
    except ValueError:
      numbers = ()
    if len(numbers) != parts or min(numbers) < 0:
      example = "8-10,8-11" if parts == 2 else "1,3"
      raise UserInputError(f"--{flag} has {value!r}; pass numbers from 1, e.g. {example}")
    parsed.append(numbers if parts == 2 else numbers[0])
  return tuple(parsed)


def _request(values: flags.FlagValues) -> _Request:
  for name in ("checkpoint", "conllu", "output_dir"):
    if not values[name].value:
      raise UserInputError(f"--{name} is required")
  if values["batch_size"].value < 1:
    raise UserInputError(f"--batch_size={values['batch_size'].value} must be at least 1")
  if values["max_sentences"].value < 0:
    raise UserInputError(f"--max_sentences={values['max_sentences'].value}: pass 0 (all) or more")
  return _Request(
    checkpoint=values["checkpoint"].value,
    conllu=values["conllu"].value,
    output_dir=epath.Path(values["output_dir"].value),
    batch_size=values["batch_size"].value,
    max_sentences=values["max_sentences"].value,
    min_count=values["min_count"].value,
    heatmap_sentences=_positive_list(values["heatmap_sentences"].value, "heatmap_sentences", 1),
    heatmap_heads=_positive_list(values["heatmap_heads"].value, "heatmap_heads", 2),
  )


def _check_choices(request: _Request, sentences, model):
  """Refuses heatmap sentences or heads that do not exist, before the model runs."""
  for index in request.heatmap_sentences:
    if index >= len(sentences):
      raise UserInputError(
        f"--heatmap_sentences has {index + 1}, but {len(sentences)} sentences are analysed"
      )
  for layer, head in request.heatmap_heads:
    if layer >= model.num_layers or head >= model.num_heads:
      raise UserInputError(
        f"--heatmap_heads has {layer + 1}-{head + 1}, but the model has layers 1-"
        f"{model.num_layers} and heads 1-{model.num_heads}"
      )


def _punctuation(example) -> np.ndarray:
  """[T] bool: the tokens of the example's punctuation words."""
  sentence = example.sentence
  words = np.array(
    [head_stats.is_punctuation(*pair) for pair in zip(sentence.words, sentence.upos)]
  )
  return (example.words_of_tokens >= 0) & words[example.words_of_tokens]


def _heatmap_heads(request: _Request, results: dict) -> tuple:
  if request.heatmap_heads:
    return request.heatmap_heads
  best = report.best_heads(results)[:_DEFAULT_HEATMAP_RELATIONS]
  return tuple(dict.fromkeys((row["layer"], row["head"]) for row in best))


def _write_pictures(output_dir, results, statistics, drawn, heads, min_count: int):
  # Imported here: matplotlib is an extra, and `_analyze` says so before the model runs.
  from bert_jax.tools.attention_analysis import plots  # pylint: disable=g-import-not-at-top

  for directory in ("relations", "statistics", "heatmaps"):
    (output_dir / directory).mkdir(parents=True, exist_ok=True)
  for relation, result in results.items():
    if result.count < min_count:
      continue
    panels = [
      (
        f"{d}: baseline {result.baseline[d].accuracy:.1%} at offset {result.baseline[d].offset:+d}",
        result.accuracy[d],
      )
      for d in relations.DIRECTIONS
    ]
    plots.grids(
      output_dir / "relations" / f"{plots.file_stem(relation)}.png",
      panels,
      f"{relation} ({result.count} dependencies): accuracy of each head",
      vmin=0.0,
      vmax=1.0,
    )
  for name, grid in statistics.items():
    plots.grids(
      output_dir / "statistics" / f"{name}.png", [(name, grid)], f"{name}, mean over tokens"
    )
  for index, (words, maps_NHWW) in sorted(drawn.items()):
    for layer, head in heads:
      name = report.head_name(layer, head)
      plots.heatmap(
        output_dir / "heatmaps" / f"sentence{index + 1}_head{name}.png",
        maps_NHWW[layer, head],
        words,
        f"sentence {index + 1}, head {name} (layer-head)",
      )


def _analyze(values: flags.FlagValues):
  request = _request(values)
  if importlib.util.find_spec("matplotlib") is None:
    raise UserInputError(
      "analyze-attention draws its pictures with matplotlib; install the analysis extra: "
      "pip install 'bert_jax[analysis]'"
    )
  sentences = conllu.read(request.conllu)[: request.max_sentences or None]
  run = workdir_params.read_run(request.checkpoint, flag="--checkpoint")
  model = run.model
  if families.get(model.family).has_memory:
    raise UserInputError(
      f"model.family={model.family!r} uses relative attention with memory and forms no "
      "softmax attention matrix to analyse; pass a workdir of a family with softmax attention"
    )
  tokenizer = embed.run_tokenizer(values, run)
  _check_choices(request, sentences, model)
  examples, skipped = attention_maps.examples(sentences, tokenizer, model.max_position_embeddings)
  if not examples:
    raise UserInputError(
      f"no sentence of --conllu={request.conllu} fits: {len(skipped.too_long)} are longer than "
      f"the model's {model.max_position_embeddings} positions, {len(skipped.empty_word)} have a "
      "word of no token"
    )
  scores = relations.RelationScores(model.num_layers, model.num_heads)
  statistics = head_stats.HeadStatistics(model.num_layers, model.num_heads)
  drawn = {}
  params = weight_table.unscanned(run.params, model)["bert"]
  separator_id = tokenizer.special_ids.sep
  with tqdm(total=len(examples), unit="sentence", disable=not values["progress"].value) as progress:
    for example, attention_NHTT in attention_maps.attention(
      examples, params, model, request.batch_size
    ):
      maps_NHWW = word_maps.word_level(attention_NHTT, example.words_of_tokens)
      scores.add(example.sentence, maps_NHWW)
      statistics.add(attention_NHTT, example.ids == separator_id, _punctuation(example))
      if example.index in request.heatmap_sentences:
        drawn[example.index] = (example.sentence.words, maps_NHWW)
      progress.update()
  results, means = scores.results(), statistics.means()
  about = {
    "model": {
      "family": model.family,
      "num_layers": model.num_layers,
      "num_heads": model.num_heads,
      "max_positions": model.max_position_embeddings,
      "checkpoint": str(run.step_dir),
    },
    "sentences": {
      "read": len(sentences),
      "analyzed": len(examples),
      "too_long": len(skipped.too_long),
      "empty_word": len(skipped.empty_word),
    },
  }
  output_dir = request.output_dir
  output_dir.mkdir(parents=True, exist_ok=True)
  report.write_json(output_dir / "analysis.json", report.as_json(results, means, about))
  report.write_csv(output_dir / "heads.csv", results, means)
  text = report.summary(results, about, request.min_count)
  (output_dir / "summary.txt").write_text(text)
  _write_pictures(
    output_dir, results, means, drawn, _heatmap_heads(request, results), request.min_count
  )
  print(text, end="")
  if skipped.too_long:
    first = ", ".join(str(i + 1) for i in skipped.too_long[:5])
    print(
      f"skipped {len(skipped.too_long)} sentences longer than the model's "
      f"{model.max_position_embeddings} positions (sentences {first}"
      f"{', ...' if len(skipped.too_long) > 5 else ''})",
      file=sys.stderr,
    )
  print(
    f"wrote {output_dir}: analysis.json, heads.csv, summary.txt, relations/, statistics/, heatmaps/"
  )


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _analyze, argv)


if __name__ == "__main__":
  raise SystemExit(main())
