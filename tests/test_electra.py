"""ELECTRA's model and objective: sampling without gradient, labels, metrics, bad sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics as sklearn_metrics

from bert_jax.errors import UserInputError
from bert_jax.models.electra import options as electra_config
from bert_jax.models.electra.model import ElectraForPreTraining
from bert_jax.models.families import model_config_from_dict
from bert_jax.tasks import electra_pretraining, score_histograms
from tests import helpers, run_helpers

CONFIG = model_config_from_dict(
  dict(
    family="electra",
    vocab_size=64,
    hidden_size=32,
    embedding_size=16,
    num_layers=2,
    num_heads=2,
    intermediate_size=48,
    max_position_embeddings=16,
    attention_kind="dense",
  )
)
TASK = electra_pretraining.ElectraPretrainingTask(
  CONFIG, max_seq_length=12, max_predictions_per_seq=4
)


@pytest.fixture(scope="module")
def batch_and_params():
  batch = {k: jnp.asarray(v) for k, v in TASK.random_batch(4, seed=3).items()}
  inputs = TASK.model_inputs(batch)
  params = jax.jit(ElectraForPreTraining(CONFIG).init)(jax.random.key(0), *inputs)["params"]
  return batch, params


@pytest.fixture(scope="module")
def single_device_step():
  return helpers.one_train_step(_sharding_config(**{"mesh.data": 1}), jax.devices()[:1])


def _sharding_config(**overrides):
  """`helpers.small_config` as ELECTRA: discriminator H=128 A=4 E=64, generator H=32 A=4, one
  layer each (a mesh splits every layer alike; one compiles in about half the time of two)."""
  return helpers.small_config(
    **{
      "model.family": "electra",
      "model.num_layers": 1,
      "model.embedding_size": 64,
      # Four generator heads (the fraction gives one) so mesh.tensor=4 splits them too.
      "model.electra.generator_num_heads": 4,
      "data.objective": "none",
      **overrides,
    }
  )


@jax.jit
def _apply(params, batch):
  model = ElectraForPreTraining(CONFIG)
  return model.apply(
    {"params": params}, *TASK.model_inputs(batch), rngs={"sampling": jax.random.key(1)}
  )


def test_generator_config_follows_the_fraction_and_explicit_sizes():
  gen = electra_config.generator_config(CONFIG)
  assert (gen.hidden_size, gen.num_heads, gen.intermediate_size, gen.num_layers) == (8, 1, 12, 2)
  assert gen.embedding_size == 16  # The shared tables' width.
  explicit = CONFIG.with_sections(
    electra=electra_config.ElectraOptions(generator_hidden_size=16, generator_num_heads=2)
  )
  assert electra_config.generator_config(explicit).hidden_size == 16


def test_generator_wider_or_deeper_than_discriminator_is_refused():
  tiny = {"size": "tiny", "family": "electra"}  # Discriminator: 2 layers, hidden 128.
  with pytest.raises(UserInputError, match=r"generator \(hidden 256, 2 layers\) is larger than"):
    model_config_from_dict(tiny | {"electra": {"generator_hidden_size": 256}})
  with pytest.raises(UserInputError, match=r"generator \(hidden 32, 3 layers\) is larger than"):
    model_config_from_dict(tiny | {"electra": {"generator_num_layers": 3}})
  with pytest.raises(UserInputError, match="unknown model.electra config keys"):
    model_config_from_dict(tiny | {"electra": {"generator_width": 3}})


def test_labels_mark_exactly_the_sampled_tokens_that_differ(batch_and_params):
  batch, params = batch_and_params
  outputs = _apply(params, batch)
  labels = np.asarray(outputs["rtd_labels"])
  positions, weights = (
    np.asarray(batch["masked_lm_positions"]),
    np.asarray(batch["masked_lm_weights"]),
  )
  # Only real predicted positions can be replaced ...
  allowed = np.zeros_like(labels, bool)
  for row in range(labels.shape[0]):
    allowed[row, positions[row][weights[row] > 0]] = True
  assert labels.any() and not labels[~allowed].any()
  # ... and a sample equal to the original token is labelled original: a generator that puts
  # all its mass on the original ids (huge bias on them) replaces nothing.
  boosted = jax.tree.map(lambda x: x, params)
  bias = np.zeros(CONFIG.vocab_size, np.float32)
  first_ids = np.asarray(batch["masked_lm_ids"])[0, 0]
  bias[first_ids] = 1e4
  boosted["generator_head"]["output_bias"] = jnp.asarray(bias)
  boosted_labels = np.asarray(_apply(boosted, batch)["rtd_labels"])
  originals = np.asarray(batch["masked_lm_ids"])
  for row in range(labels.shape[0]):
    for p, w, original in zip(positions[row], weights[row], originals[row]):
      if w > 0:
        assert boosted_labels[row, p] == int(original != first_ids)


def test_sampling_temperature_divides_the_generator_logits(batch_and_params):
  batch, params = batch_and_params
  first_id = int(np.asarray(batch["masked_lm_ids"])[0, 0])
  favoured = jax.tree.map(lambda x: x, params)
  favoured["generator_head"]["output_bias"] = jnp.zeros(CONFIG.vocab_size).at[first_id].set(2.0)
  positions = np.asarray(batch["masked_lm_positions"])
  real = np.asarray(batch["masked_lm_weights"]) > 0
  # A generator that always sampled `first_id` replaces exactly the other tokens.
  expected = (np.asarray(batch["masked_lm_ids"]) != first_id)[real]

  def labels(temperature):
    options = electra_config.ElectraOptions(sampling_temperature=temperature)
    model = ElectraForPreTraining(CONFIG.with_sections(electra=options))

    @jax.jit  # One compile instead of each op's own.
    def apply(params, batch):
      return model.apply(
        {"params": params}, *TASK.model_inputs(batch), rngs={"sampling": jax.random.key(1)}
      )

    outputs = apply(favoured, batch)
    return np.take_along_axis(np.asarray(outputs["rtd_labels"]), positions, 1)[real]

  # Cold, the favoured token (bias 2 / 0.01 = 200) is every sample; at the paper's 1 it is not.
  np.testing.assert_array_equal(labels(0.01), expected)
  assert not np.array_equal(labels(1.0), expected)
  with pytest.raises(UserInputError, match=r"model.electra.sampling_temperature=0.0 must be > 0"):
    model_config_from_dict(
      {"size": "tiny", "family": "electra", "electra": {"sampling_temperature": 0.0}}
    )


def test_no_gradient_flows_through_the_sampling(batch_and_params):
  batch, params = batch_and_params

  def weighted_sum(p, name):
    out = _apply(p, batch)[name]
    return jnp.sum(out * jnp.linspace(-1.0, 1.0, out.size).reshape(out.shape))

  def norms(grads, top):
    return float(sum(jnp.sum(g**2) for g in jax.tree.leaves(grads[top])))

  rtd, mlm = jax.jit(
    lambda p: (jax.grad(weighted_sum)(p, "rtd_logits"), jax.grad(weighted_sum)(p, "mlm_logits"))
  )(params)
  # The discriminator's loss reaches neither the generator nor its head: samples are constants.
  assert norms(rtd, "generator") == 0.0 and norms(rtd, "generator_head") == 0.0
  assert norms(rtd, "discriminator_head") > 0.0
  # The generator's loss reaches the shared embeddings but not the discriminator's encoder.
  assert norms(mlm, "discriminator_head") == 0.0 and norms(mlm["bert"], "encoder") == 0.0
  assert norms(mlm["bert"], "embeddings") > 0.0 and norms(mlm, "generator") > 0.0


def test_loss_and_metrics_match_a_numpy_reference():
  rng = np.random.default_rng(0)
  batch = TASK.random_batch(3, seed=1)
  mask = batch["input_mask"]
  rtd_labels = (rng.random(mask.shape) < 0.3).astype(np.int32)
  outputs = {
    "mlm_logits": rng.normal(size=(3, 4, CONFIG.vocab_size)).astype(np.float32),
    # Scores that separate the classes partly, so the AUC is neither 0.5 nor 1.
    "rtd_logits": (rng.normal(size=mask.shape) + rtd_labels).astype(np.float32),
    "rtd_labels": rtd_labels,
  }
  loss, sums = TASK.loss_and_sums(outputs, batch, TASK.denominators(batch))
  metrics = TASK.metrics_from_sums(jax.device_get(sums))
  real = mask > 0
  logits, labels = outputs["rtd_logits"][real], outputs["rtd_labels"][real]
  bce = np.mean(np.logaddexp(0, logits) - labels * logits)
  predicted = logits > 0
  log_probs = outputs["mlm_logits"] - np.log(np.exp(outputs["mlm_logits"]).sum(-1, keepdims=True))
  w = batch["masked_lm_weights"]
  ids = batch["masked_lm_ids"]
  mlm = -np.sum(np.take_along_axis(log_probs, ids[..., None], -1)[..., 0] * w) / w.sum()
  np.testing.assert_allclose(float(loss), mlm + 50.0 * bce, rtol=1e-5)
  np.testing.assert_allclose(metrics["rtd_loss"], bce, rtol=1e-5)
  assert metrics["rtd_accuracy"] == pytest.approx(np.mean(predicted == labels))
  assert metrics["rtd_precision"] == pytest.approx(
    np.sum(predicted & (labels == 1)) / predicted.sum()
  )
  assert metrics["rtd_recall"] == pytest.approx(np.sum(predicted & (labels == 1)) / labels.sum())
  assert metrics["rtd_baseline_accuracy"] == pytest.approx(1 - labels.mean())
  # The AUC over the metric's probability buckets, pair by pair: a replaced token above an
  # original one counts 1, in the same bucket 1/2 (score_histograms.py).
  probabilities = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
  buckets = np.minimum(
    np.floor(probabilities * score_histograms.NUM_BUCKETS), score_histograms.NUM_BUCKETS - 1
  ).astype(int)
  replaced, original = buckets[labels == 1][:, None], buckets[labels == 0][None, :]
  pairs = (replaced > original) + 0.5 * (replaced == original)
  assert metrics["rtd_auc"] == pytest.approx(np.mean(pairs), rel=1e-12)
  # It differs from the exact AUC of the scores by half the pairs that share a bucket at most.
  exact_auc = sklearn_metrics.roc_auc_score(labels, logits)
  assert 0.6 < exact_auc < 0.95
  assert abs(metrics["rtd_auc"] - exact_auc) <= 0.5 * np.mean(replaced == original) + 1e-12


def test_sentence_objective_is_refused():
  data = type("Data", (), {"objective": "nsp", "max_seq_length": 12, "max_predictions_per_seq": 4})
  with pytest.raises(UserInputError, match="data.objective='nsp' needs a sentence head"):
    electra_pretraining.make_task(CONFIG, data)


def test_generator_wider_than_discriminator_exits_with_one_line(tmp_path):
  flag = "--config.model.electra.generator_hidden_size=256"
  result = run_helpers.run_main(tmp_path, [flag], config="configs/electra_tiny.py")
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
  expected = "the ELECTRA generator (hidden 256, 2 layers) is larger than the discriminator"
  assert lines[-1].startswith("error: ") and expected in lines[-1], result.stderr[-2000:]


def test_parameter_counts_equal_hugging_face_at_the_small_widths():
  transformers = pytest.importorskip("transformers")
  pytest.importorskip("torch")
  config = model_config_from_dict(
    {
      "family": "electra",
      "num_layers": 2,  # Fewer layers than ELECTRA-Small (12) keep the test quick.
      "hidden_size": 256,
      "num_heads": 4,
      "intermediate_size": 1024,
      "embedding_size": 128,
    }
  )  # configs/electra_small.py's widths.
  ids = jnp.zeros((1, 8), jnp.int32)
  shapes = jax.eval_shape(
    lambda: ElectraForPreTraining(config).init(jax.random.key(0), ids, ids, ids + 1)
  )["params"]
  count = lambda tree: sum(x.size for x in jax.tree.leaves(tree))
  gen = electra_config.generator_config(config)

  def hf(model_class, c):
    hf_config = transformers.ElectraConfig(
      embedding_size=128,
      hidden_size=c.hidden_size,
      num_hidden_layers=c.num_layers,
      num_attention_heads=c.num_heads,
      intermediate_size=c.intermediate_size,
    )
    return model_class(hf_config).num_parameters()  # Tied tensors counted once.

  assert count(shapes["bert"]) + count(shapes["discriminator_head"]) == hf(
    transformers.ElectraForPreTraining, config
  )
  shared = count(shapes["bert"]["embeddings"])
  assert count(shapes["generator"]) + count(shapes["generator_head"]) + shared == hf(
    transformers.ElectraForMaskedLM, gen
  )


@pytest.mark.parametrize(
  "axes",
  [{"mesh.data": 2, "mesh.tensor": 4}, {"mesh.data": 1, "mesh.fsdp": 8}],
  ids=["data2xtensor4", "fsdp8"],
)
def test_sharded_step_equals_single_device(single_device_step, axes):
  init_1, params_1, metrics_1, _ = single_device_step
  init_8, params_8, metrics_8, specs = helpers.one_train_step(
    _sharding_config(**axes), jax.devices()
  )
  sharded = [spec for spec in specs if any(axis is not None for axis in spec)]
  assert sharded, "nothing was sharded"
  jax.tree.map(np.testing.assert_array_equal, init_1, init_8)
  # The generator drew the same tokens on every mesh: the same positions were replaced and the
  # discriminator was right on the same ones (counts, exactly).
  for key in ("rtd_replaced", "rtd_correct", "rtd_predicted_replaced", "mlm_accuracy"):
    assert metrics_8[key] == metrics_1[key], key
  assert 0 < metrics_1["rtd_replaced"] < metrics_1["rtd_tokens"]
  for key in ("mlm_loss", "rtd_loss", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  assert {"bert", "generator", "generator_head", "discriminator_head"} == set(params_1)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )
