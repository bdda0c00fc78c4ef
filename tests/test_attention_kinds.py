"""The attention-kind records answer what the package asks, and only they know kind names."""

import ast
import pathlib

import pytest

from bert_jax.errors import UserInputError
from bert_jax.models.attention import chunk_window, kernels, kinds
from bert_jax.models.config import LshOptions, ModelConfig
from tests import helpers

REPO = pathlib.Path(__file__).resolve().parents[1]
ATTENTION_PACKAGE = REPO / "bert_jax" / "models" / "attention"


def _names_attention_kind(node) -> bool:
  return (isinstance(node, ast.Name) and node.id == "attention_kind") or (
    isinstance(node, ast.Attribute) and node.attr == "attention_kind"
  )


def _has_string_literal(node) -> bool:
  if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
    return any(_has_string_literal(element) for element in node.elts)
  return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _kind_comparisons(tree):
  """Line numbers where ``attention_kind`` is compared with a string literal (or several)."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Compare):
      operands = (node.left, *node.comparators)
      if any(map(_names_attention_kind, operands)) and any(map(_has_string_literal, operands)):
        yield node.lineno


def test_no_module_outside_attention_compares_kind_names():
  offenders = [
    f"{path.relative_to(REPO)}:{line}"
    for path in sorted((REPO / "bert_jax").rglob("*.py"))
    if ATTENTION_PACKAGE not in path.parents
    for line in _kind_comparisons(helpers.parse_python(path))
  ]
  assert not offenders, f"ask kinds.get(model.attention_kind) instead: {offenders}"


@pytest.mark.parametrize(
  "source",
  [
    'if config.attention_kind == "lsh": pass',
    'x = model.attention_kind in ("lsh", "local")',
    'ok = "cudnn" != attention_kind',
  ],
)
def test_the_scan_finds_a_comparison(source):
  assert list(_kind_comparisons(ast.parse(source))) == [1]


def _with(**answer):
  """The kinds whose record answers each given attribute with the given value."""
  return {
    kind.name for kind in kinds.KINDS if all(getattr(kind, k) == v for k, v in answer.items())
  }


def test_records_answer():
  assert _with(approximate=True) == {"lsh", "local"}
  assert _with(chunked=True) == {"lsh", "local"}
  assert _with(dropout=True) == {"dense", "flash"}
  assert _with(refuses_dropout=True) == {"fused", "splash", "cudnn"}
  assert _with(keeps_probs=True) == {"dense"}
  assert _with(masks_by_length=True) == {"cudnn"}
  assert _with(packed=True) == {"flash"}
  assert _with(rngs=("hashing",)) == {"lsh"}
  assert kinds.get("lsh").projections == ("query", "value")
  assert _with(projections=("query", "key", "value")) == set(kinds.NAMES) - {"lsh"}
  assert kinds.get("cudnn").platforms == ("gpu",)
  assert kinds.get("splash").platforms == ("tpu",)
  assert kinds.get("flash").head_dims == (16, 32, 64, 128, 256)


def test_every_kind_but_auto_has_a_kernel_and_auto_picks_among_them():
  assert set(kernels.KERNELS) == set(kinds.NAMES) - {"auto"}
  assert set(kinds.get("auto").picks) <= set(kernels.KERNELS)
  assert _with(picks=()) == set(kernels.KERNELS)


@pytest.mark.parametrize(
  "platform,length,rate,head_dim,keep_probs,runs",
  [
    ("cpu", 512, 0.1, 64, False, "dense"),
    ("gpu", 128, 0.1, 64, False, "flash"),
    ("gpu", 128, 0.1, 64, True, "dense"),  # Only dense keeps its probabilities.
    ("tpu", 128, 0.0, 64, False, "splash"),
    ("tpu", 512, 0.1, 64, False, "flash"),
  ],
)
def test_auto_resolves_to_the_kind_it_picks(platform, length, rate, head_dim, keep_probs, runs):
  resolved = kinds.get("auto").resolve(platform, length, rate, head_dim, keep_probs=keep_probs)
  assert resolved is kinds.get(runs)


def test_a_concrete_kind_resolves_to_itself():
  lsh = kinds.get("lsh")
  assert lsh.resolve("gpu", 128, 0.1, 64, keep_probs=True) is lsh


def test_an_unknown_kind_is_one_line_naming_the_kinds():
  with pytest.raises(UserInputError, match=r"^model.attention_kind='sparse' is unknown; choose"):
    kinds.get("sparse")
  with pytest.raises(UserInputError, match="dense, fused, splash, cudnn, flash, auto, lsh, local"):
    ModelConfig(attention_kind="sparse")


@pytest.mark.parametrize(
  "settings,message",
  [
    (
      dict(attention_kind="fused"),
      "model.attention_kind='fused' has no attention-probability dropout; set "
      "model.attention_dropout_rate=0.0",
    ),
    (
      dict(attention_kind="flash", hidden_size=96, num_heads=2),
      "model.attention_kind='flash' takes head_dim 16, 32, 64, 128, 256, got head_dim=48; "
      "change model.num_heads",
    ),
    (
      dict(attention_kind="cudnn", attention_dropout_rate=0.0),
      "model.attention_kind='cudnn' runs in bf16, but model.dtype='float32'; set "
      "model.dtype=bfloat16",
    ),
    (
      dict(attention_kind="cudnn", attention_dropout_rate=0.0, dtype="bfloat16", num_heads=64),
      "model.attention_kind='cudnn' takes heads of at most 128 and a multiple of 8, got "
      "head_dim=12",
    ),
  ],
)
def test_the_config_asks_the_record(settings, message):
  with pytest.raises(UserInputError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
    ModelConfig(**settings)


def test_one_chunk_window_check_for_config_and_kernels():
  with pytest.raises(UserInputError, match=r"^model\.lsh\.chunk_len=0 must be >= 1"):
    LshOptions(chunk_len=0)
  with pytest.raises(UserInputError, match=r"model\.lsh\.n_chunks_after=-1 must be >= 0"):
    LshOptions(n_chunks_after=-1)
  with pytest.raises(UserInputError, match=r"^n_chunks_before=-1 and n_chunks_after=0 must be"):
    chunk_window.check_window(8, -1, 0)
  with pytest.raises(UserInputError, match="sequence length 24 is not a multiple of chunk_len 16"):
    chunk_window.check_whole_chunks(24, 16)
