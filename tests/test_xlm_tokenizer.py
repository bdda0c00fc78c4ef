"""XLM's own tokenizer: ids equal transformers' XLMTokenizer on the embedded corpus, and an
XLMWithLMHeadModel saved with its tokenizer converts both ways and embeds as transformers does."""

import json

import numpy as np
import pytest

from bert_jax.data import bpe_training, default_corpus, tokenization, xlm_tokenization
from bert_jax.errors import UserInputError
from bert_jax.models.xlm.model import XlmEncoder
from bert_jax.models.xlm.options import XlmOptions
from bert_jax.tools import convert, embed, train_vocab, workdir_params
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytest.importorskip("sacremoses")

VOCAB_SIZE = 700
LANGUAGES = {"en": 0, "fr": 1}
SENTENCES = [
  "The river flows north through the valley.",
  "Earth's average surface temperature is about 15 °C.",
  "Most land areas are in an albedo range of 0.1 to 0.4. The average is about 0.3.",
  "Café society in Zürich met at the Musée (1911).",
]

# Special tokens written in the text, line breaks, cased and accented letters.
ODD_TEXTS = [
  "The <special1> is blue.",
  "The<special1>is <s> x</s>",
  "<SPECIAL1> A",
  "",
  "a<pad><pad>b",
  "Ünïcödé ΟΔΟΣ İstanbul",
  "line\nBreak Ä",
]


@pytest.fixture(scope="module")
def lines():
  """Non-empty lines of the first ~60 KB of the embedded Wikipedia sample."""
  with open(default_corpus.default_corpus_path(), encoding="utf-8") as f:
    sample = f.read(60_000).rsplit("\n", 1)[0]
  return [line for line in sample.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def vocab(lines, tmp_path_factory):
  """An XLM vocab.json (+ merges.txt) trained by train_vocab --kind=xlm_bpe."""
  root = tmp_path_factory.mktemp("xlm_vocab")
  (root / "text.txt").write_text("\n".join(lines), encoding="utf-8")
  path = str(root / "vocab.json")
  tokenizer = train_vocab.train(
    inputs=str(root / "text.txt"), output=path, kind="xlm_bpe", vocab_size=VOCAB_SIZE
  )
  assert isinstance(tokenizer, xlm_tokenization.XlmTokenizer)
  return path


@pytest.mark.parametrize("lowercase", [True, False])
def test_ids_equal_xlm_tokenizer_on_real_text(vocab, lines, lowercase):
  ours = tokenization.load_tokenizer(vocab, lowercase=lowercase)
  reference = transformers.XLMTokenizer(
    vocab_file=vocab,
    merges_file=str(xlm_tokenization.merges_path(vocab)),
    do_lowercase_and_remove_accent=lowercase,
  )
  texts = lines[:150] + SENTENCES + ODD_TEXTS
  ids = ours.encode_batch(texts)
  assert ids == reference(texts, add_special_tokens=False)["input_ids"]
  assert sum(map(len, ids)) > 5_000  # Real text, not a handful of tokens.
  a, b = texts[:40:2], texts[1:40:2]
  pairs = [ours.with_special_tokens(x, y)[0] for x, y in zip(*map(ours.encode_batch, (a, b)))]
  assert pairs == reference(a, b)["input_ids"]
  assert pairs[0][0] == 0 and pairs[0].count(1) == 2  # <s> a </s> b </s>
  assert ours.vocab_size == VOCAB_SIZE == len(reference)
  special = ours.special_ids
  assert (special.cls, special.sep, special.pad, special.unk) == (0, 1, 2, 3)
  assert special.mask == reference.mask_token_id == 5 and ours.first_regular_id == 14


def test_a_byte_level_vocab_still_loads_as_roberta(tmp_path, lines):
  (tmp_path / "text.txt").write_text("\n".join(lines), encoding="utf-8")
  path = str(tmp_path / "vocab.json")
  bpe_training.train_byte_level_bpe(str(tmp_path / "text.txt"), path, 400)
  assert type(tokenization.load_tokenizer(path)).__name__ == "ByteLevelBpeTokenizer"


@pytest.fixture(scope="module")
def converted(vocab, tmp_path_factory):
  """(torch XLMWithLMHeadModel of two languages, its HF dir with XLM's tokenizer, workdir)."""
  root = tmp_path_factory.mktemp("xlm_convert")
  model = hf_reference.random_xlm(
    transformers,
    torch,
    seed=3,
    vocab_size=VOCAB_SIZE,
    emb_dim=32,
    n_layers=2,
    n_heads=4,
    n_langs=2,
    lang2id=LANGUAGES,
    id2lang={i: name for name, i in LANGUAGES.items()},
    max_position_embeddings=64,
  )
  model.save_pretrained(root / "hf")
  transformers.XLMTokenizer(
    vocab_file=vocab,
    merges_file=str(xlm_tokenization.merges_path(vocab)),
    lang2id=LANGUAGES,
    id2lang={i: name for name, i in LANGUAGES.items()},
    do_lowercase_and_remove_accent=False,
  ).save_pretrained(root / "hf")
  workdir = root / "workdir"
  assert (
    convert.main(["convert", "--from=hf", f"--input={root / 'hf'}", f"--output={workdir}"]) == 0
  )
  return model, root / "hf", workdir


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_embed_of_a_converted_xlm_equals_transformers(converted, tmp_path, language):
  model, hf_dir, workdir = converted
  reference = transformers.XLMTokenizer.from_pretrained(hf_dir)
  assert not reference.do_lowercase_and_remove_accent
  (tmp_path / "lines.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
  argv = [
    "embed",
    f"--checkpoint={workdir}",
    f"--input={tmp_path / 'lines.txt'}",
    f"--output={tmp_path / 'e.npz'}",
    "--layers=-1",
    f"--language={language}",
  ]
  assert embed.main(argv) == 0
  arrays = np.load(tmp_path / "e.npz")
  ids, lengths = arrays["input_ids"], arrays["lengths"]
  encoded = reference(SENTENCES, padding=True, return_tensors="pt")
  np.testing.assert_array_equal(ids, encoded["input_ids"].numpy() * (ids > 0))
  langs = torch.full_like(encoded["input_ids"], LANGUAGES[language])
  with torch.no_grad():
    theirs = model.transformer(
      input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], langs=langs
    ).last_hidden_state.numpy()
  real = np.arange(ids.shape[1])[None] < lengths[:, None]
  np.testing.assert_allclose(arrays["embeddings"][:, 0][real], theirs[real], atol=1e-5, rtol=1e-5)


def test_embed_needs_a_language_of_the_model(converted, tmp_path, capsys):
  _, _, workdir = converted
  (tmp_path / "lines.txt").write_text("A line.\n", encoding="utf-8")
  base = ["embed", f"--checkpoint={workdir}", f"--input={tmp_path / 'lines.txt'}"]
  for extra, expected in (([], "pass --language"), (["--language=de"], "--language=de")):
    assert embed.main([*base, f"--output={tmp_path / 'e.npz'}", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "en, fr" in err and "\n" not in err


def test_round_trip_carries_the_tokenizer_files(converted, tmp_path):
  _, hf_dir, workdir = converted
  run = workdir_params.read_run(str(workdir))
  assert run.model.xlm.languages == ("en", "fr")
  vocab_path, lowercase = workdir_params.run_vocab(run)
  assert vocab_path.endswith("vocab.json") and lowercase is False
  out = tmp_path / "back"
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={out}"]) == 0
  settings = json.loads((out / "tokenizer_config.json").read_text())
  assert settings["tokenizer_class"] == "XLMTokenizer"
  assert settings["lang2id"] == LANGUAGES
  tokenizer = transformers.AutoTokenizer.from_pretrained(out)
  original = transformers.XLMTokenizer.from_pretrained(hf_dir)
  assert type(tokenizer).__name__ == "XLMTokenizer" and not tokenizer.do_lowercase_and_remove_accent
  assert tokenizer(SENTENCES)["input_ids"] == original(SENTENCES)["input_ids"]
  loaded = transformers.XLMWithLMHeadModel.from_pretrained(out)
  assert loaded.config.lang2id == LANGUAGES


def test_bad_xlm_vocab_is_one_line(tmp_path):
  (tmp_path / "merges.txt").write_text("a b\n")
  (tmp_path / "vocab.json").write_text(json.dumps({"<s>": 0, "<special1>": 1}))
  with pytest.raises(UserInputError, match="lacks </s>, <pad>"):
    tokenization.load_tokenizer(str(tmp_path / "vocab.json"))


def test_model_xlm_language_is_the_language_without_ids(converted):
  """Fine-tuning passes no language ids: model.xlm.language picks the embedding they get."""
  _, _, workdir = converted
  run = workdir_params.read_run(str(workdir))
  ids = np.array([[0, 40, 41, 42, 1]], np.int32)
  mask = np.ones_like(ids)
  apply = XlmEncoder(run.model.with_sections(xlm=XlmOptions(("en", "fr"), language="fr")))
  alone, _ = apply.apply({"params": run.params["bert"]}, ids, 0 * ids, mask)
  with_ids, _ = XlmEncoder(run.model).apply(
    {"params": run.params["bert"]}, ids, 0 * ids, mask, language_ids_BL=np.ones_like(ids)
  )
  english, _ = XlmEncoder(run.model).apply({"params": run.params["bert"]}, ids, 0 * ids, mask)
  np.testing.assert_array_equal(alone, with_ids)
  assert not np.allclose(alone, english)
  with pytest.raises(UserInputError, match="model.xlm.language='de' is not one of"):
    XlmOptions(("en", "fr"), language="de")


def test_glue_fine_tuning_from_a_converted_xlm_takes_its_tokenizer_and_language(
  converted, tmp_path
):
  _, _, workdir = converted
  config = finetune_fixtures.short_mrpc_config(workdir, tmp_path, num_train=16, num_eval=8, steps=2)
  config.model.xlm = {"language": "fr"}
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  assert np.isfinite(metrics["loss"]), metrics
  model = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
  assert model["family"] == "xlm" and model["xlm"]["language"] == "fr"
  assert model["xlm"]["languages"] == ["en", "fr"]
