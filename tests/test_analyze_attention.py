"""tools/analyze_attention on a converted Hugging Face BERT equals the same analysis computed
here, with plain loops, on transformers' own ``output_attentions``; pictures and bad input."""

import json
import shutil

import numpy as np
import pytest

from bert_jax.tools import analyze_attention, convert
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SAMPLE = "tests/attention_sample.conllu"
# Whole words, and pieces that split "chased", "children", "1990", "n't" into several tokens.
_WORDS = (
  "the cat sat on mat . dog chase ##d a small ball my sister reads books every night letter was "
  "written by her brother we do n ' t like cold rain child ##ren played in park after school "
  "old man gave his friend book she opened window because room hot students read long report "
  "and wrote notes house built 19 ##90 our teacher told us story about sea john bought apples , "
  "mary oranges"
)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_WORDS.split()]
MAX_POSITIONS = 11  # Sentences 8 and 11 (12 tokens with [CLS] and [SEP]) do not fit.
LAYERS, HEADS = 2, 4
QUERY_SCALE = 30.0
# The reference's most-attended word must lead the runner-up by more than float32 noise,
# so equal predictions are not luck.
MIN_MARGIN = 1e-5


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
  """(HF model, root dir, the output dir of analyze_attention on the sample)."""
  root = tmp_path_factory.mktemp("analyze")
  model = hf_reference.random_bert(
    transformers,
    torch,
    kind="model",
    seed=5,
    vocab_size=len(VOCAB),
    hidden_size=32,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    intermediate_size=48,
    max_position_embeddings=MAX_POSITIONS,
  )
  with torch.no_grad():  # Peaked attention: no near-tie can make the argmax a coin toss.
    for layer in model.encoder.layer:
      layer.attention.self.query.weight.mul_(QUERY_SCALE)
  model.save_pretrained(root / "hf")
  (root / "hf" / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  argv = ["convert", "--from=hf", f"--input={root / 'hf'}", f"--output={root / 'workdir'}"]
  assert convert.main(argv) == 0
  assert (
    analyze_attention.main(
      [
        "analyze_attention",
        f"--checkpoint={root / 'workdir'}",
        f"--conllu={SAMPLE}",
        f"--output_dir={root / 'out'}",
        "--batch_size=4",
        "--heatmap_sentences=2,5",
        "--heatmap_heads=1-2,2-4",
        "--min_count=5",
        "--noprogress",
      ]
    )
    == 0
  )
  return model, root, root / "out"


def _read_sample():
  """(words, heads 0-based or -1, relations, upos) per sentence, read here independently."""
  sentences, rows = [], []
  for line in [*open(SAMPLE, encoding="utf-8").read().splitlines(), ""]:
    if not line:
      if rows:
        sentences.append(tuple(zip(*rows)))
      rows = []
    elif not line.startswith("#") and line.split("\t")[0].isdigit():
      columns = line.split("\t")
      rows.append((columns[1], int(columns[6]) - 1, columns[7], columns[3]))
  return sentences


def _word_map(a, tokens_of):
  """Word i's mean over its tokens of the attention summed over word j's tokens."""
  count = len(tokens_of)
  w = np.zeros((count, count))
  for i in range(count):
    for j in range(count):
      w[i, j] = np.mean([sum(a[q, k] for k in tokens_of[j]) for q in tokens_of[i]])
  return w


def _most_attended(w, i):
  """The other word that word i attends to most, the earlier one of ties."""
  others = sorted((j for j in range(len(w)) if j != i), key=lambda j: (-w[i, j], j))
  assert w[i, others[0]] - w[i, others[1]] > MIN_MARGIN, (i, w[i])
  return others[0]


def _reference(model, root):
  """The analysis by plain loops on transformers' attention: (relations, statistics, counts)."""
  tokenizer = transformers.BertTokenizerFast(vocab_file=str(root / "hf" / "vocab.txt"))
  correct, counts, stats = {}, {}, {}
  tokens_seen = neighbours = 0
  analysed = skipped = 0
  for words, heads, relations, upos in _read_sample():
    encoded = tokenizer(list(words), is_split_into_words=True, return_tensors="pt")
    if encoded["input_ids"].shape[1] > MAX_POSITIONS:
      skipped += 1
      continue
    analysed += 1
    with torch.no_grad():
      attention = np.stack(
        [a[0].numpy() for a in model(**encoded, output_attentions=True).attentions]
      ).astype(np.float64)
    word_ids = encoded.word_ids()
    length, count = len(word_ids), len(words)
    tokens_of = [[t for t, w in enumerate(word_ids) if w == i] for i in range(count)]
    punct = [t for t, w in enumerate(word_ids) if w is not None and upos[w] == "PUNCT"]
    for layer in range(LAYERS):
      for head in range(HEADS):
        a = attention[layer, head]
        w = _word_map(a, tokens_of)
        for dep, (gov, rel) in enumerate(zip(heads, relations)):
          if gov < 0:
            continue
          siblings = {d for d in range(count) if heads[d] == gov and relations[d] == rel}
          key = (rel, layer, head)
          correct.setdefault(key, [0, 0])
          correct[key][0] += _most_attended(w, dep) == gov
          correct[key][1] += _most_attended(w, gov) in siblings
        s = stats.setdefault((layer, head), np.zeros(6))
        s[0] += a[:, 0].sum()
        s[1] += a[:, length - 1].sum()
        s[2] += sum(a[:, k].sum() for k in punct)
        s[3] += sum(a[q, q - 1] for q in range(1, length))
        s[4] += sum(a[q, q + 1] for q in range(length - 1))
        s[5] += -sum(p * np.log(p) for p in a.ravel() if p > 0)
    for rel in relations:
      counts[rel] = counts.get(rel, 0) + 1
    tokens_seen += length
    neighbours += length - 1
  counts.pop("root")
  for s in stats.values():
    s[[0, 1, 2, 5]] /= tokens_seen
    s[[3, 4]] /= neighbours
  return correct, counts, stats, (analysed, skipped)


def test_analysis_equals_the_same_computation_on_transformers_attention(analysed):
  model, root, out = analysed
  record = json.loads((out / "analysis.json").read_text())
  correct, counts, stats, (analysed_count, skipped) = _reference(model, root)
  assert record["sentences"] == {
    "read": 12,
    "analyzed": analysed_count,
    "too_long": skipped,
    "empty_word": 0,
  }
  assert skipped == 2
  assert {r: v["count"] for r, v in record["relations"].items()} == counts
  for (rel, layer, head), (to_head, to_dependent) in correct.items():
    got = record["relations"][rel]
    # analysis.json keeps 6 decimals.
    dep2head, head2dep = got["dep2head"]["accuracy"], got["head2dep"]["accuracy"]
    assert dep2head[layer][head] == pytest.approx(to_head / counts[rel], abs=1e-6)
    assert head2dep[layer][head] == pytest.approx(to_dependent / counts[rel], abs=1e-6)
  names = ["first_special", "separator", "punctuation", "previous", "next", "entropy"]
  for (layer, head), values in stats.items():
    for name, value in zip(names, values):
      assert record["statistics"][name][layer][head] == pytest.approx(value, abs=2e-6)


def test_tables_summary_and_pictures(analysed):
  _, _, out = analysed
  record = json.loads((out / "analysis.json").read_text())
  rows = (out / "heads.csv").read_text().splitlines()
  assert len(rows) == 1 + LAYERS * HEADS
  assert rows[0].startswith("layer,head,first_special,separator,punctuation,previous,next,")
  assert "det:dep2head" in rows[0] and "nmod:poss:head2dep" in rows[0]
  summary = (out / "summary.txt").read_text()
  assert summary.startswith("10 of 12 sentences analysed (2 longer than the model's 11")
  shown = [line.split()[0] for line in summary.splitlines()[3:-1]]
  assert shown == ["det", "punct", "nsubj", "obj", "case"]  # Those of --min_count=5.
  assert summary.splitlines()[-1].endswith("with fewer than 5 dependencies not shown)")
  for best in record["best_heads"][:5]:
    line = next(x for x in summary.splitlines() if x.startswith(best["relation"] + " "))
    assert f"{best['layer']}-{best['head']}" in line and f"{best['accuracy']:.1%}" in line
    assert f"{best['baseline_accuracy']:.1%}" in line
  drawn = sorted(r for r, v in record["relations"].items() if v["count"] >= 5)
  assert drawn == ["case", "det", "nsubj", "obj", "punct"]
  assert sorted(p.stem for p in (out / "relations").iterdir()) == drawn
  pictures = [
    *(out / "relations" / f"{r}.png" for r in drawn),
    *(out / "statistics" / f"{name}.png" for name in record["statistics"]),
    *(out / "heatmaps" / f"sentence{s}_head{h}.png" for s in (2, 5) for h in ("1-2", "2-4")),
  ]
  for picture in pictures:
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 2000
  assert len(list((out / "heatmaps").iterdir())) == 4


def _edited_workdir(root, tmp_path, **model_changes):
  copy = tmp_path / "workdir"
  shutil.copytree(root / "workdir", copy)
  config = json.loads((copy / "config.json").read_text())
  config["model"].update(model_changes)
  (copy / "config.json").write_text(json.dumps(config))
  return copy


@pytest.mark.parametrize(
  "case,expected",
  [
    ("no_deprel", "has no HEAD / DEPREL"),
    ("lsh", "attention_kind is 'lsh', which forms no full attention matrix"),
    ("memory", "model.family='xlnet' uses relative attention with memory"),
    ("all_too_long", "no sentence of --conllu="),
    ("heads", "--heatmap_heads has 3-1, but the model has layers 1-2 and heads 1-4"),
    ("sentences", "--heatmap_sentences has 13, but 12 sentences are analysed"),
  ],
)
def test_bad_input_fails_with_one_line(analysed, tmp_path, capsys, case, expected):
  _, root, _ = analysed
  flags = {
    "checkpoint": root / "workdir",
    "conllu": SAMPLE,
    "output_dir": tmp_path / "out",
  }
  if case == "no_deprel":
    flags["conllu"] = tmp_path / "plain.conllu"
    flags["conllu"].write_text("1\tThe\tthe\tDET\t_\t_\t_\t_\t_\t_\n")
  elif case == "lsh":
    flags["checkpoint"] = _edited_workdir(root, tmp_path, attention_kind="lsh")
  elif case == "memory":
    flags["checkpoint"] = _edited_workdir(root, tmp_path, family="xlnet")
  elif case == "all_too_long":
    flags["checkpoint"] = _edited_workdir(root, tmp_path, max_position_embeddings=4)
  extra = {"heads": ["--heatmap_heads=3-1"], "sentences": ["--heatmap_sentences=13"]}
  argv = ["analyze_attention", *(f"--{k}={v}" for k, v in flags.items()), "--noprogress"]
  assert analyze_attention.main(argv + extra.get(case, [])) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected in errors[0], errors
  assert not (tmp_path / "out").exists()
