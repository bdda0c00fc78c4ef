"""Hugging Face's PyTorch BertForPreTraining trained the same way, as a benchmark baseline.

The reference a GPU user compares with: SDPA attention, AdamW (fused on CUDA) with bert_jax's
hyper-parameters (no weight decay on LayerNorm or biases), global-norm clipping at
``optimizer.max_grad_norm``, the config's dropout, and on CUDA bf16 autocast when
``model.dtype`` is bfloat16 (float32 weights, as bert_jax keeps them). The loss is
`hf_flax_baseline`'s: masked LM at the masked positions + NSP, so Hugging Face scores every position
with the vocabulary projection and bert_jax only the masked ones. Left out: the learning-rate
schedule (a scalar a step; it costs no time). On CPU the step runs in float32: autocast to
bf16 is a GPU recipe, and CPU bf16 matmuls would time PyTorch's emulation instead. On a CPU
shared with other jobs, PyTorch's OpenMP threads spin while they wait for a core (BERT-tiny,
2 cores at load 12: 7.0 s a step, 0.56 s with ``OMP_NUM_THREADS=1``); time it with one thread
there.

Works with transformers 4.57 and 5.x.
"""

import dataclasses
import os

from bert_jax.bench import hf_export, step_timing
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.train.optimizer import OptimizerConfig

# The transformers class the step below trains (its loss reads its NSP head).
_ARCHITECTURE = "BertForPreTraining"


@dataclasses.dataclass(frozen=True)
class TorchBaseline:
  """One update of the PyTorch model, and what it ran as.

  Attributes:
    runner: dispatches one update (a handle of its loss and, on CUDA, an event recorded after
      the optimizer's step, which ``wait`` synchronises on).
    params: parameters of the model (the tied decoder counted once).
    device: ``cpu``, or the name of the GPU it ran on.
    compute_dtype: ``bfloat16 autocast`` or ``float32``.
    versions: torch and transformers versions.
  """

  runner: step_timing.Runner
  params: int
  device: str
  compute_dtype: str
  versions: str

  def step(self):
    """Runs one update to completion and returns its loss tensor."""
    loss, _ = self.runner.run_one()
    return loss


def import_torch():
  """(torch, transformers), or a one-line error naming the install.

  Raises:
    UserInputError: either is not installed.
  """
  # transformers' PyTorch BERT would import TensorFlow where it is installed (seconds, and
  # this tool imports no TensorFlow); PyTorch alone is what it needs.
  os.environ.setdefault("USE_TF", "0")
  try:
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
  except ImportError as error:
    raise UserInputError(
      f"--baseline=hf_torch needs PyTorch and transformers ({error}); "
      "install them with pip install -e '.[hf]'"
    ) from None
  return torch, transformers


def check_config(model_config: ModelConfig):
  """Refuses a family whose Hugging Face export is not BertForPreTraining.

  Raises:
    UserInputError: the family's model is another (or has no Hugging Face counterpart).
  """
  if hf_export.architectures(model_config) != {"": _ARCHITECTURE}:
    raise UserInputError(
      f"--baseline=hf_torch times Hugging Face's BertForPreTraining, not model.family="
      f"{model_config.family!r}; use a BERT config or --baseline=hf_flax"
    )


def _optimizer(torch, model, config: OptimizerConfig, cuda: bool):
  """AdamW decaying the matrices only, as bert_jax's `weight_decay_mask` (kernels, embeddings;
  not biases or LayerNorm scales, the 1-D parameters)."""
  params = [p for p in model.parameters() if p.requires_grad]
  groups = [
    {"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
    {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
  ]
  return torch.optim.AdamW(
    groups,
    lr=config.learning_rate,
    betas=(config.b1, config.b2),
    eps=config.eps,
    fused=cuda,  # One kernel for the whole update; CUDA only.
  )


def train_step(
  model_config: ModelConfig,
  optimizer_config: OptimizerConfig,
  host_batch,
  *,
  compile_model: bool = False,
  seed: int = 0,
) -> TorchBaseline:
  """Builds BertForPreTraining, its optimizer and the batch on the device.

  Args:
    model_config: the bert_jax model (``family=bert``) it mirrors.
    optimizer_config: AdamW's hyper-parameters and the clipping norm.
    host_batch: numpy arrays of a pretraining batch (`bert_jax.tasks.pretraining`'s keys).
    compile_model: wrap the model in ``torch.compile``.
    seed: torch's seed for the initial weights and dropout.

  Returns:
    A `TorchBaseline`; its first ``step`` call compiles when ``compile_model``.

  Raises:
    UserInputError: torch or transformers is missing, or the family is not BERT.
  """
  check_config(model_config)
  torch, transformers = import_torch()
  cuda = torch.cuda.is_available()
  device = torch.device("cuda" if cuda else "cpu")
  torch.manual_seed(seed)
  (values,) = hf_export.exported_configs(model_config).values()
  hf_config = hf_export.hf_config(transformers, values, attn_implementation="sdpa")
  model = getattr(transformers, _ARCHITECTURE)(hf_config).to(device)
  attention = model.config._attn_implementation  # pylint: disable=protected-access
  if attention != "sdpa":  # Time the attention the baseline claims.
    raise RuntimeError(f"BertForPreTraining was asked for SDPA attention and runs {attention!r}")
  model.train()
  params = [p for p in model.parameters() if p.requires_grad]
  num_params = sum(p.numel() for p in params)
  optimizer = _optimizer(torch, model, optimizer_config, cuda)
  forward = torch.compile(model) if compile_model else model
  autocast = cuda and model_config.dtype == "bfloat16"
  batch = {k: torch.as_tensor(v, device=device) for k, v in host_batch.items()}
  long = {k: batch[k].long() for k in ("input_ids", "token_type_ids", "input_mask")}
  positions_BP = batch["masked_lm_positions"].long()
  rows_BP = torch.arange(positions_BP.shape[0], device=device)[:, None].expand_as(positions_BP)
  ids_BP, weights_BP = batch["masked_lm_ids"].long(), batch["masked_lm_weights"].float()
  nsp_labels_B = batch["next_sentence_labels"].long()
  cross_entropy = torch.nn.functional.cross_entropy

  def dispatch():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
      outputs = forward(
        input_ids=long["input_ids"],
        attention_mask=long["input_mask"],
        token_type_ids=long["token_type_ids"],
      )
      logits_BPV = outputs.prediction_logits[rows_BP, positions_BP].float()
      mlm_BP = cross_entropy(logits_BPV.flatten(0, 1), ids_BP.flatten(), reduction="none")
      mlm = (mlm_BP * weights_BP.flatten()).sum() / weights_BP.sum().clamp(min=1.0)
      nsp = cross_entropy(outputs.seq_relationship_logits.float(), nsp_labels_B)
      loss = mlm + nsp
    loss.backward()
    if optimizer_config.max_grad_norm > 0:
      torch.nn.utils.clip_grad_norm_(params, optimizer_config.max_grad_norm)
    optimizer.step()
    done = torch.cuda.Event() if cuda else None
    if done is not None:
      done.record()
    return loss.detach(), done

  def wait(handle):
    _, done = handle
    if done is not None:
      done.synchronize()  # This update's kernels, not those of one dispatched after it.

  return TorchBaseline(
    runner=step_timing.Runner(dispatch, wait),
    params=num_params,
    device=torch.cuda.get_device_name() if cuda else "cpu",
    compute_dtype="bfloat16 autocast" if autocast else "float32",
    versions=f"torch {torch.__version__}, transformers {transformers.__version__}",
  )
