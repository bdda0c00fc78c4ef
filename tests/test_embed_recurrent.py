"""tools/embed for xlnet and transformer_xl: memory across the lines of a document changes a
later line's embedding exactly as the model's own memory does; without it a line's embedding
is the line's alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import families
from bert_jax.tools import convert, embed, workdir_params
from tests import transformer_xl_reference, xlnet_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "."]
VOCAB += ["dog", "##s", "ran", "a"]
DOCUMENTS = ["the cat sat", "on the mat .", "", "", "dogs ran a"]  # Two documents.
LINES = [line for line in DOCUMENTS if line]


def _hf_model(family):
  if family == "xlnet":
    return xlnet_reference.random_xlnet(
      transformers, torch, 7, vocab_size=len(VOCAB), d_model=16, n_layer=2, n_head=2,
      d_inner=24, mem_len=12,
    )  # fmt: skip
  return transformer_xl_reference.random_transfo_xl(
    transformers, torch, 7, vocab_size=len(VOCAB), d_model=16, d_embed=8, n_head=2, d_head=8,
    d_inner=24, n_layer=2, mem_len=12, clamp_len=5, same_length=False,
  )  # fmt: skip


@pytest.fixture(scope="module", params=["xlnet", "transformer_xl"])
def workdir(request, tmp_path_factory):
  root = tmp_path_factory.mktemp(request.param)
  _hf_model(request.param).save_pretrained(root / "hf")
  (root / "hf" / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  assert convert.main(["convert", "--from=hf", f"--input={root / 'hf'}", f"--output={root}/w"]) == 0
  for name, lines in (("documents", DOCUMENTS), ("lines", LINES), ("second", LINES[1:2])):
    (root / f"{name}.txt").write_text("\n".join(lines) + "\n")
  return root


def _embed(root, name, *flags):
  output = root / f"{name}{len(flags)}.npz"
  argv = ["embed", f"--checkpoint={root}/w", f"--input={root / name}.txt", f"--output={output}"]
  assert embed.main([*argv, "--layers=0,-1", *flags]) == 0
  return dict(np.load(output))


def test_memory_changes_a_later_line_exactly_as_the_models_memory(workdir):
  with_memory = _embed(workdir, "documents", "--memory_across_lines", "--batch_size=2")
  alone = _embed(workdir, "lines", "--batch_size=2")
  np.testing.assert_array_equal(with_memory["documents"], [0, 0, 1])
  np.testing.assert_array_equal(with_memory["input_ids"], alone["input_ids"])
  mask = np.arange(alone["input_ids"].shape[1]) < alone["lengths"][:, None]
  got, want = with_memory["embeddings"][:, 1], alone["embeddings"][:, 1]
  # A document's first line has no memory; the second line sees the first.
  for line in (0, 2):
    np.testing.assert_allclose(got[line][mask[line]], want[line][mask[line]], atol=1e-5)
  assert np.max(np.abs(got[1][mask[1]] - want[1][mask[1]])) > 1e-3
  # ... exactly as the trunk computes it with line 0's layer inputs as memory.
  run = workdir_params.read_run(f"{workdir}/w")
  encoder = families.get(run.model.family).encoder(run.model)
  streams = jax.jit(
    lambda ids, memory: encoder.apply(
      {"params": run.params["bert"]}, ids, 0 * ids, jnp.ones_like(ids), memory, method="streams"
    )
  )
  first = streams(alone["input_ids"][:1, : alone["lengths"][0]], None)["layer_inputs"]
  second = streams(alone["input_ids"][1:2, : alone["lengths"][1]], first)["content"]
  np.testing.assert_allclose(got[1][mask[1]], np.asarray(second)[0], atol=1e-5)


def test_without_memory_a_line_embeds_as_it_does_alone(workdir):
  together = _embed(workdir, "lines", "--batch_size=3", "--pooling=mean")
  single = _embed(workdir, "second", "--pooling=mean")
  np.testing.assert_allclose(single["embeddings"][0], together["embeddings"][1], atol=1e-5)


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--attention"], "--attention is not available for model.family="),
    (["--memory_across_lines", "--mem_len=-1"], "--mem_len=-1 must be >= 0"),
  ],
)
def test_bad_input_is_one_line(workdir, tmp_path, capsys, flags, message):
  argv = ["embed", f"--checkpoint={workdir}/w", f"--input={workdir / 'lines.txt'}"]
  assert embed.main([*argv, f"--output={tmp_path / 'o.npz'}", *flags]) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and message in errors[0], errors
