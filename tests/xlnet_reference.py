"""Random-init Hugging Face (PyTorch) XLNets built offline, and permutation inputs for them."""

import numpy as np


def random_xlnet(transformers, torch, seed, kind="lm", **config_kwargs):
  """An ``XLNetLMHeadModel`` (``XLNetModel`` for kind="model") with every weight random, eval.

  LayerNorm scales sit around 1 and every bias is non-zero, so a tensor mapped to the wrong
  place or left out changes the outputs. Dropout is off.
  """
  config = transformers.XLNetConfig(dropout=0.0, **config_kwargs)
  torch.manual_seed(seed)
  model_class = transformers.XLNetLMHeadModel if kind == "lm" else transformers.XLNetModel
  model = model_class(config).eval()
  with torch.no_grad():
    for name, parameter in model.named_parameters():  # The tied table appears once.
      centre = 1.0 if name.endswith("layer_norm.weight") else 0.0
      parameter.copy_(centre + 0.1 * torch.randn_like(parameter))
  return model


def permutation(rng, batch, length, num_predict):
  """(perm_mask [B, L, L], target_mapping [B, P, L]) float32 of a random order per row; the
  last ``num_predict`` tokens of each order are predicted."""
  perm_mask = np.zeros((batch, length, length), np.float32)
  mapping = np.zeros((batch, num_predict, length), np.float32)
  for b in range(batch):
    order = rng.permutation(length)
    rank = np.empty(length, int)
    rank[order] = np.arange(length)
    targets = order[-num_predict:]
    # i may not see j if j comes later in the order, nor itself when i is a target.
    perm_mask[b] = rank[None, :] > rank[:, None]
    perm_mask[b, targets, targets] = 1.0
    mapping[b, np.arange(num_predict), targets] = 1.0
  return perm_mask, mapping
