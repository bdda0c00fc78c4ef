"""Random-init Hugging Face (PyTorch) BERTs built offline, the reference for conversion tests.

Every parameter is drawn at random (LayerNorm scales around 1, biases non-zero), so a tensor
mapped to the wrong place, transposed or left out changes the outputs.
"""

import jax
import numpy as np


def random_bert(transformers, torch, *, kind="pretraining", seed=0, **config_kwargs):
  """A ``BertForPreTraining`` (or ``BertModel`` for kind="model") with random weights, eval mode.

  Args:
    transformers: the imported module (tests import it with ``pytest.importorskip``).
    torch: the imported module.
    kind: "pretraining" or "model".
    seed: torch seed of the weights.
    **config_kwargs: `transformers.BertConfig` fields.
  """
  config = transformers.BertConfig(hidden_act="gelu", attn_implementation="eager", **config_kwargs)
  torch.manual_seed(seed)
  model_class = (
    transformers.BertForPreTraining if kind == "pretraining" else (transformers.BertModel)
  )
  return _randomised(torch, model_class(config).eval())


def random_distilbert(transformers, torch, *, kind="mlm", seed=0, **config_kwargs):
  """A ``DistilBertForMaskedLM`` (or ``DistilBertModel`` for kind="model"), random, eval mode.

  Args:
    transformers: the imported module.
    torch: the imported module.
    kind: "mlm" or "model".
    seed: torch seed of the weights.
    **config_kwargs: `transformers.DistilBertConfig` fields.
  """
  config = transformers.DistilBertConfig(attn_implementation="eager", **config_kwargs)
  torch.manual_seed(seed)
  model_class = (
    transformers.DistilBertForMaskedLM if kind == "mlm" else transformers.DistilBertModel
  )
  return _randomised(torch, model_class(config).eval())


def random_roberta(transformers, torch, *, stem="Roberta", kind="mlm", seed=0, **config_kwargs):
  """A ``RobertaForMaskedLM`` / ``RobertaModel`` (kind "mlm" / "model"), random, eval mode;
  ``stem="XLMRoberta"`` gives XLM-R's classes.

  Args:
    transformers: the imported module.
    torch: the imported module.
    stem: "Roberta" or "XLMRoberta".
    kind: "mlm" or "model".
    seed: torch seed of the weights.
    **config_kwargs: `transformers.RobertaConfig` fields.
  """
  config = getattr(transformers, f"{stem}Config")(
    hidden_act="gelu", attn_implementation="eager", **config_kwargs
  )
  torch.manual_seed(seed)
  model_class = getattr(transformers, f"{stem}ForMaskedLM" if kind == "mlm" else f"{stem}Model")
  return _randomised(torch, model_class(config).eval())


def random_xlm(transformers, torch, *, kind="lm", seed=0, **config_kwargs):
  """An ``XLMWithLMHeadModel`` (or ``XLMModel`` for kind="model"), random weights, eval mode.

  Args:
    transformers: the imported module.
    torch: the imported module.
    kind: "lm" or "model".
    seed: torch seed of the weights.
    **config_kwargs: `transformers.XLMConfig` fields (``lang2id`` names the languages).
  """
  config = transformers.XLMConfig(attn_implementation="eager", **config_kwargs)
  torch.manual_seed(seed)
  model_class = transformers.XLMWithLMHeadModel if kind == "lm" else transformers.XLMModel
  model = model_class(config).eval()
  # The sinusoids stay: XLM never trains them.
  fixed = ("position_embeddings.weight",) if config.sinusoidal_embeddings else ()
  return _randomised(torch, model, fixed=fixed)


def _randomised(torch, model, fixed=()):
  """Every parameter (but names ending in ``fixed``) drawn at random; LayerNorm scales near 1."""
  with torch.no_grad():
    for name, parameter in model.named_parameters():  # Tied tensors appear once.
      if fixed and name.endswith(fixed):
        continue
      scale = name.endswith(("LayerNorm.weight", "layer_norm.weight")) or (
        "layer_norm" in name and name.endswith(".weight")  # XLM: layer_norm1.<i>.weight.
      )
      parameter.copy_(float(scale) + 0.05 * torch.randn_like(parameter))
  return model


def random_inputs(vocab_size, batch=3, length=13, type_vocab_size=2, seed=0, pad_id=None):
  """(input_ids, token_type_ids, mask) int32 numpy, with padding of different lengths.

  ``pad_id``: put it on the padding and nowhere else (RoBERTa finds padding by its id).
  """
  rng = np.random.default_rng(seed)
  input_ids = rng.integers(0, vocab_size, size=(batch, length)).astype(np.int32)
  token_types = rng.integers(0, type_vocab_size, size=(batch, length)).astype(np.int32)
  mask = np.ones((batch, length), np.int32)
  mask[1, length - 4 :] = 0
  mask[2, 5:] = 0
  if pad_id is not None:
    input_ids = np.where(input_ids == pad_id, pad_id + 1, input_ids)
    input_ids = np.where(mask == 1, input_ids, pad_id).astype(np.int32)
  return input_ids, token_types, mask


def torch_outputs(torch, model, input_ids, token_types, mask):
  """The model's outputs on numpy inputs, as numpy: hidden states, attentions, logits."""
  segments = {}
  # DistilBERT has no token types; RoBERTa's one type is all zeros.
  if model.config.model_type in ("bert", "roberta", "xlm-roberta"):
    segments["token_type_ids"] = torch.from_numpy(token_types.astype(np.int64))
  elif model.config.model_type == "xlm":  # XLM's segments are languages.
    segments["langs"] = torch.from_numpy(token_types.astype(np.int64))
  with torch.no_grad():
    outputs = model(
      input_ids=torch.from_numpy(input_ids.astype(np.int64)),
      attention_mask=torch.from_numpy(mask.astype(np.int64)),
      output_hidden_states=True,
      output_attentions=True,
      **segments,
    )
  result = {
    "hidden_states": [h.numpy() for h in outputs.hidden_states],
    "attentions": [a.numpy() for a in outputs.attentions],
  }
  if hasattr(outputs, "prediction_logits"):
    result.update(
      mlm_logits=outputs.prediction_logits.numpy(),
      nsp_logits=outputs.seq_relationship_logits.numpy(),
    )
  elif hasattr(outputs, "logits"):  # DistilBertForMaskedLM, XLMWithLMHeadModel
    result["mlm_logits"] = outputs.logits.numpy()
  return result


def random_albert(transformers, torch, *, kind="pretraining", seed=0, **config_kwargs):
  """An ``AlbertForPreTraining`` (or ``AlbertModel`` for kind="model"), random weights, eval mode.

  Args:
    transformers: the imported module.
    torch: the imported module.
    kind: "pretraining" or "model".
    seed: torch seed of the weights.
    **config_kwargs: `transformers.AlbertConfig` fields.
  """
  config = transformers.AlbertConfig(attn_implementation="eager", **config_kwargs)
  torch.manual_seed(seed)
  model_class = (
    transformers.AlbertForPreTraining if kind == "pretraining" else transformers.AlbertModel
  )
  model = model_class(config).eval()
  with torch.no_grad():
    for name, parameter in model.named_parameters():
      centre = 1.0 if "LayerNorm.weight" in name or "layer_norm.weight" in name else 0.0
      parameter.copy_(centre + 0.05 * torch.randn_like(parameter))
  return model


def random_electra_pair(transformers, torch, *, seed=0, generator=None, **config_kwargs):
  """(``ElectraForPreTraining``, ``ElectraForMaskedLM``) with random weights, eval mode, and
  the generator's embeddings equal to the discriminator's (ELECTRA trains them shared).

  Args:
    transformers: the imported module.
    torch: the imported module.
    seed: torch seed of the weights.
    generator: `transformers.ElectraConfig` fields where the generator differs (its sizes).
    **config_kwargs: the discriminator's `transformers.ElectraConfig` fields.
  """
  models = []
  for model_class, overrides in (
    (transformers.ElectraForPreTraining, {}),
    (transformers.ElectraForMaskedLM, generator or {}),
  ):
    config = transformers.ElectraConfig(
      hidden_act="gelu", attn_implementation="eager", **{**config_kwargs, **overrides}
    )
    torch.manual_seed(seed + len(models))
    model = model_class(config).eval()
    with torch.no_grad():
      for name, parameter in model.named_parameters():  # Tied tensors appear once.
        centre = 1.0 if name.endswith("LayerNorm.weight") else 0.0
        parameter.copy_(centre + 0.05 * torch.randn_like(parameter))
    models.append(model)
  discriminator, generator_model = models
  with torch.no_grad():  # In place, so the generator's tied decoder follows its word table.
    for name, tensor in discriminator.electra.embeddings.state_dict().items():
      generator_model.electra.embeddings.state_dict()[name].copy_(tensor)
  return discriminator, generator_model


# Relative to the largest gradient of a model, what float32 leaves in a gradient that is zero in
# exact arithmetic.
ROUNDING_NOISE = 1e-6


def assert_gradients_equal(ours, theirs, atol=1e-6, own_atol=1e-5):
  """Two params trees of gradients hold the same paths and equal values, tensor by tensor.

  Each tensor's tolerance is the smaller of ``atol`` of the largest gradient of all and
  ``own_atol`` of its own largest gradient, so a tensor whose gradients are much smaller than
  the others' is checked as closely relative to its size. (Within a tensor float32 sums over
  the batch leave ~1e-6 of its largest value, so ``own_atol`` is 1e-5, the outputs' tolerance.)
  A tensor that is zero in exact arithmetic (the key bias: softmax ignores a shift shared by all
  keys) holds only rounding noise on both sides, below `ROUNDING_NOISE` of the largest gradient
  of all; it is checked to be such noise on our side too.
  """
  flat_ours = jax.tree_util.tree_leaves_with_path(ours)
  flat_theirs = dict(jax.tree_util.tree_leaves_with_path(theirs))
  assert len(flat_ours) == len(flat_theirs)
  largest = max(float(np.max(np.abs(g))) for g in flat_theirs.values())
  for path, grad in flat_ours:
    name, want = jax.tree_util.keystr(path), np.asarray(flat_theirs[path])
    scale = float(np.max(np.abs(want)))
    if scale <= ROUNDING_NOISE * largest:
      assert float(np.max(np.abs(grad))) <= ROUNDING_NOISE * largest, f"{name}: not zero"
      continue
    tolerance = min(atol * largest, own_atol * scale)
    np.testing.assert_allclose(grad, want, rtol=0, atol=tolerance, err_msg=name)
