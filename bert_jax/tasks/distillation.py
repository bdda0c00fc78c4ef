"""Knowledge distillation (Sanh et al. 2019, DistilBERT): a frozen teacher, a trained student.

``task=distillation`` trains the ``model`` section's student on the pretraining data pipeline
(MLM positions) against a frozen teacher read from ``distillation.teacher``, a bert_jax workdir
or a converted Hugging Face model (`tools/convert --from=hf`). The loss, each term a config key:

  soft_weight   * T^2 * CE(softmax(teacher / T), log_softmax(student / T))   at masked positions
  + mlm_weight  * CE(true token, student)                                     at masked positions
  + cosine_weight * (1 - cos(student hidden, teacher hidden))                 at real tokens

The soft term is the cross-entropy against the teacher's tempered distribution (its gradient
equals the KL divergence's) multiplied by T^2, Hinton et al.'s scaling that keeps its gradient
size independent of T. It is taken at the masked positions, where the pipeline predicts, not at
every token as Sanh et al.'s code does by default: the vocabulary projection dominates a small
student's cost. The hidden states are the encoders' last layer; the cosine needs equal widths.

The teacher's forward pass runs first in the jitted step and hands its outputs over as batch
entries (``teacher_mlm_logits``, ``teacher_sequence_output``), so the student's `train_step` is
the ordinary one and the teacher's parameters are a separate argument, never in the train
state, the optimizer or the checkpoints (`bert_jax/train/teacher.py` loads them).
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax import workdir as workdir_lib
from bert_jax.config_fields import option
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig, stored_model_section
from bert_jax.models.families import model_config_from_dict
from bert_jax.tasks import trunk
from bert_jax.tasks.cross_entropy import softmax_cross_entropy
from bert_jax.tasks.interface import TaskDefaults
from bert_jax.tasks.pretraining import PretrainingTask

STUDENT_INITS = ("every_other_layer", "scratch")
TEACHER_LOGITS = "teacher_mlm_logits"
TEACHER_SEQUENCE = "teacher_sequence_output"


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
  """The ``distillation`` section of the config (used by ``task=distillation`` only)."""

  teacher: str = option(
    "",
    help="The frozen teacher: a bert_jax workdir (or checkpoint dir) or a converted HF model; "
    "for tools/aot_compile a directory holding only its config.json.",
  )
  temperature: float = option(2.0, help="Softmax temperature T of the soft targets (DistilBERT 2).")
  soft_weight: float = option(5.0, help="alpha: weight of T^2 x soft cross-entropy (DistilBERT 5).")
  mlm_weight: float = option(2.0, help="beta: weight of the masked-LM loss (DistilBERT 2).")
  cosine_weight: float = option(
    1.0, help="gamma: weight of 1 - cosine(student, teacher last hidden states) (DistilBERT 1)."
  )
  student_init: str = option(
    "every_other_layer",
    help="every_other_layer: student layer i = teacher layer 2i, embeddings and MLM head "
    "copied (DistilBERT); scratch: random init.",
  )

  def __post_init__(self):
    if self.student_init not in STUDENT_INITS:
      raise UserInputError(
        f"distillation.student_init={self.student_init!r} is unknown; choose one of "
        f"{', '.join(STUDENT_INITS)}"
      )
    if self.temperature <= 0:
      raise UserInputError(
        f"distillation.temperature={self.temperature} must be > 0 (DistilBERT: 2)"
      )
    weights = (self.soft_weight, self.mlm_weight, self.cosine_weight)
    if min(weights) < 0 or not any(weights):
      raise UserInputError(
        f"distillation soft_weight / mlm_weight / cosine_weight = {weights} must be >= 0 and "
        "not all 0 (DistilBERT: 5.0 / 2.0 / 1.0)"
      )


@dataclasses.dataclass(frozen=True)
class Teacher:
  """Where the teacher's parameters are and the model they belong to.

  Attributes:
    step_dir: its ``checkpoints/<step>`` directory (absolute); None for a directory holding
      only a config.json, which gives the shapes `tools/aot_compile` needs but no weights.
    model: its model config (from its config.json), computing in the student's dtype.
  """

  step_dir: str | None
  model: ModelConfig


def no_checkpoint_error(path: str) -> UserInputError:
  """The one-line error for a teacher directory without weights."""
  return UserInputError(
    f"distillation.teacher={path} holds no checkpoint; point it at a bert_jax workdir or a "
    "converted Hugging Face model (tools/convert --from=hf); its config.json alone is enough "
    "only for tools/aot_compile"
  )


def read_teacher(path: str, student: ModelConfig) -> Teacher:
  """The teacher at ``path`` (a workdir, its checkpoints/ or one checkpoints/<step>).

  A directory with a teacher's config.json and no checkpoint gives a `Teacher` without weights
  (``step_dir=None``): enough to trace and compile the distillation step ahead of time, and
  refused by `bert_jax.train.teacher.load_params` when a run needs the weights.

  Raises:
    UserInputError: neither a checkpoint nor a config.json there, or a vocab other than the
      student's.
  """
  if not path:
    raise UserInputError(
      "task=distillation needs distillation.teacher: a bert_jax workdir or a Hugging Face "
      "model converted with `python -m bert_jax.tools.convert --from=hf`"
    )
  try:
    step_dir = workdir_lib.find_checkpoint(path)
    run = workdir_lib.of_checkpoint(step_dir)
  except UserInputError:
    step_dir, run = None, workdir_lib.Workdir.at(path)
    if not run.config_json.exists():
      raise no_checkpoint_error(path) from None
  stored = stored_model_section(run.read_config())
  if not stored:
    raise UserInputError(
      f"distillation.teacher={path}: {run.config_json} with its model section is missing; "
      "the teacher must be a whole bert_jax workdir"
    )
  # Its own architecture; the compute dtype is this run's, no remat (the teacher has no grads).
  model = model_config_from_dict(dict(stored, dtype=student.dtype, remat_policy="none"))
  if model.vocab_size != student.vocab_size:
    raise UserInputError(
      f"distillation.teacher={path} has vocab_size={model.vocab_size} but the student's "
      f"model.vocab_size is {student.vocab_size}; distillation compares distributions over "
      "one vocab: use the teacher's vocab (model.vocab_size and data.vocab_path)"
    )
  return Teacher(step_dir=None if step_dir is None else str(step_dir.resolve()), model=model)


def _is_trunk_call(module: nn.Module, method_name: str) -> bool:
  return (
    module.scope is not None and module.scope.path == (trunk.NAME,) and method_name == ("__call__")
  )


@dataclasses.dataclass(frozen=True)
class WithSequenceOutput:
  """A family's pretraining model whose outputs also hold the trunk's ``sequence_output``.

  Every family's encoder sits under the scope ``bert`` and returns (sequence, pooled)
  (`models/families.py`); its output is captured instead of changing every family's heads.
  """

  module: nn.Module

  def init(self, *args, **kwargs):
    return self.module.init(*args, **kwargs)

  def apply(self, variables, *args, **kwargs):
    outputs, captured = self.module.apply(
      variables, *args, capture_intermediates=_is_trunk_call, mutable=["intermediates"], **kwargs
    )
    sequence_BLD = captured["intermediates"][trunk.NAME]["__call__"][0][0]
    return dict(outputs, sequence_output=sequence_BLD)


@dataclasses.dataclass(frozen=True)
class DistillationTask(TaskDefaults):
  """The student's objective against the teacher outputs the batch carries."""

  model_config: ModelConfig
  max_seq_length: int
  max_predictions_per_seq: int
  settings: DistillationConfig
  teacher: Teacher = dataclasses.field()  # Required: not TaskDefaults.teacher (None) as default.

  @property
  def _pretraining(self) -> PretrainingTask:
    # The student's batches, model and MLM loss are pretraining's, without a sentence head.
    return PretrainingTask(
      self.model_config,
      self.max_seq_length,
      self.max_predictions_per_seq,
      sentence_objective="none",
    )

  def data_example_batch(self, batch_size: int):
    """Zero-filled batch of the pipeline's keys (what the teacher's forward pass reads)."""
    return self._pretraining.example_batch(batch_size)

  def example_batch(self, batch_size: int):
    """The student step's batch: the pipeline's keys plus the teacher's outputs."""
    batch = self.data_example_batch(batch_size)
    predictions, vocab = self.max_predictions_per_seq, self.teacher.model.vocab_size
    batch[TEACHER_LOGITS] = np.zeros((batch_size, predictions, vocab), np.float32)
    batch[TEACHER_SEQUENCE] = np.zeros(
      (batch_size, self.max_seq_length, self.teacher.model.hidden_size), np.float32
    )
    return batch

  def random_batch(self, batch_size: int, seed: int = 0):
    """A random pipeline batch (benchmarks); the teacher adds its outputs at each step."""
    return self._pretraining.random_batch(batch_size, seed)

  def model(self, deterministic: bool):
    """The student: ``model.family``'s pretraining model, with its sequence output."""
    return WithSequenceOutput(self._pretraining.model(deterministic))

  def teacher_model(self):
    family = families.get(self.teacher.model.family)
    return WithSequenceOutput(family.pretraining_model(self.teacher.model, deterministic=True))

  def model_inputs(self, batch):
    return self._pretraining.model_inputs(batch)

  def teacher_outputs(self, teacher_params, batch):
    """The teacher's float32 MLM logits at the masked positions and last hidden states."""
    outputs = self.teacher_model().apply(
      {"params": teacher_params},
      *self.model_inputs(batch),
      rngs={"hashing": jax.random.key(0)},  # Only LSH attention draws from it.
    )
    return {
      TEACHER_LOGITS: jax.lax.stop_gradient(outputs["mlm_logits"].astype(jnp.float32)),
      TEACHER_SEQUENCE: jax.lax.stop_gradient(outputs["sequence_output"].astype(jnp.float32)),
    }

  def denominators(self, batch):
    """Global normalisers: real predictions and real (non-padding) tokens."""
    return {
      "mlm_weight": jnp.maximum(jnp.sum(batch["masked_lm_weights"]), 1.0),
      "tokens": jnp.maximum(jnp.sum(batch["input_mask"] > 0).astype(jnp.float32), 1.0),
    }

  def loss_and_sums(self, outputs, batch, denominators):
    """Weighted loss (normalised by the global denominators) and the metric sums."""
    weights_BP = batch["masked_lm_weights"].astype(jnp.float32)
    student_BPV = outputs["mlm_logits"].astype(jnp.float32)
    t = self.settings.temperature
    teacher_probs_BPV = jax.nn.softmax(batch[TEACHER_LOGITS] / t, axis=-1)
    soft_BP = -jnp.sum(teacher_probs_BPV * jax.nn.log_softmax(student_BPV / t, axis=-1), -1)
    mlm_ce_BP = softmax_cross_entropy(student_BPV, batch["masked_lm_ids"])
    student_BLD = outputs["sequence_output"].astype(jnp.float32)
    teacher_BLD = batch[TEACHER_SEQUENCE]
    norms_BL = jnp.linalg.norm(student_BLD, axis=-1) * jnp.linalg.norm(teacher_BLD, axis=-1)
    cosine_BL = jnp.sum(student_BLD * teacher_BLD, -1) / jnp.maximum(norms_BL, 1e-8)
    real_BL = (batch["input_mask"] > 0).astype(jnp.float32)
    sums = {
      "mlm_loss": jnp.sum(mlm_ce_BP * weights_BP),
      "mlm_accuracy": jnp.sum((jnp.argmax(student_BPV, -1) == batch["masked_lm_ids"]) * weights_BP),
      "mlm_weight": jnp.sum(weights_BP),
      "soft_ce": jnp.sum(soft_BP * weights_BP) * t**2,
      "cosine_loss": jnp.sum((1.0 - cosine_BL) * real_BL),
      "tokens": jnp.sum(real_BL),
    }
    loss = (
      self.settings.soft_weight * sums["soft_ce"] / denominators["mlm_weight"]
      + self.settings.mlm_weight * sums["mlm_loss"] / denominators["mlm_weight"]
      + self.settings.cosine_weight * sums["cosine_loss"] / denominators["tokens"]
    )
    return loss, sums

  def metrics_from_sums(self, sums):
    """Host-side means; ``loss`` is the weighted total the student minimises."""
    predictions = max(float(sums["mlm_weight"]), 1.0)
    metrics = {
      "mlm_loss": float(sums["mlm_loss"]) / predictions,
      "mlm_accuracy": float(sums["mlm_accuracy"]) / predictions,
      "soft_ce": float(sums["soft_ce"]) / predictions,
      "cosine_loss": float(sums["cosine_loss"]) / max(float(sums["tokens"]), 1.0),
    }
    metrics["loss"] = (
      self.settings.soft_weight * metrics["soft_ce"]
      + self.settings.mlm_weight * metrics["mlm_loss"]
      + self.settings.cosine_weight * metrics["cosine_loss"]
    )
    return metrics


def make_task(model_config: ModelConfig, data_config, data=None, *, settings: DistillationConfig):
  """The distillation objective of the student ``model_config`` and the configured teacher.

  Sized by the `PretrainingDataConfig` (``data`` is unused), like pretraining's.

  Raises:
    UserInputError: no or unreadable teacher, another vocab, a teacher too short for the
      sequences, or widths that differ while the cosine term is on.
  """
  del data
  teacher = read_teacher(settings.teacher, model_config)
  if teacher.model.max_position_embeddings < data_config.max_seq_length:
    raise UserInputError(
      f"distillation.teacher has max_position_embeddings={teacher.model.max_position_embeddings}"
      f" < data.max_seq_length={data_config.max_seq_length}; shorten the sequences"
    )
  if settings.cosine_weight and teacher.model.hidden_size != model_config.hidden_size:
    raise UserInputError(
      f"distillation.cosine_weight={settings.cosine_weight} compares hidden states, but the "
      f"teacher's hidden_size is {teacher.model.hidden_size} and the student's "
      f"{model_config.hidden_size}; match model.hidden_size or set distillation.cosine_weight=0"
    )
  return DistillationTask(
    model_config,
    data_config.max_seq_length,
    data_config.max_predictions_per_seq,
    settings,
    teacher,
  )
