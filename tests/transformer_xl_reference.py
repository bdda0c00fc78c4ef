"""Random-init Hugging Face (PyTorch) Transformer-XLs, built offline."""

import contextlib
import warnings


def random_transfo_xl(transformers, torch, seed, kind="lm", **config_kwargs):
  """A ``TransfoXLLMHeadModel`` (``TransfoXLModel`` for kind="model") with every weight random,
  in eval mode (no dropout).

  By default ``cutoffs=[]`` and ``div_val=1``: no adaptive input or softmax (``config_kwargs``
  may set them, and ``tie_projs``). LayerNorm scales sit around 1 and every bias is non-zero,
  so a tensor mapped to the wrong place or left out changes the outputs.
  """
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # TransfoXL is deprecated in transformers 4.x.
    defaults = dict(cutoffs=[], div_val=1, adaptive=False, dropout=0.0, dropatt=0.0)
    config = transformers.TransfoXLConfig(**{**defaults, **config_kwargs})
    torch.manual_seed(seed)
    model_class = transformers.TransfoXLLMHeadModel if kind == "lm" else transformers.TransfoXLModel
    model = model_class(config).eval()
  with torch.no_grad():
    for name, parameter in model.named_parameters():  # Tied tensors appear once.
      centre = 1.0 if name.endswith("layer_norm.weight") else 0.0
      parameter.copy_(centre + 0.1 * torch.randn_like(parameter))
  return model


@contextlib.contextmanager
def working_forward(torch):
  """transformers 4.57.6's ``TransfoXLModel.forward`` calls ``tensor.type_as(dtype=...)``, which
  torch rejects (``type_as`` takes a tensor); while this is active that call means ``.to(dtype)``."""
  original = torch.Tensor.type_as

  def type_as(self, other=None, *, dtype=None):
    return self.to(dtype) if other is None else original(self, other)

  torch.Tensor.type_as = type_as
  try:
    yield
  finally:
    torch.Tensor.type_as = original
