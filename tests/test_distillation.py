"""task=distillation: student init from every other teacher layer, the checkpoint contract (no
teacher params saved, its identity recorded and checked, resume bitwise), the teacher
fingerprint, one step on a sharded mesh equal to one device, learning (distilled student beats
the same student from scratch), GLUE fine-tuning from the distilled student, and bad input."""

import json
import re
import shutil

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.default_config import base_config, finetune_config
from bert_jax.errors import UserInputError
from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.config import ModelConfig
from bert_jax.models.distilbert.model import DistilBertEncoder
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel.mesh import MeshConfig
from bert_jax.tasks import distillation
from bert_jax.tools import embed, workdir_params
from bert_jax.train import teacher as teacher_lib
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, run_helpers

# A 4-layer random teacher and a 2-layer DistilBERT student of its width; 4 heads, so
# mesh.tensor=4 splits the heads of both.
TEACHER = {
  "vocab_size": 8192,
  "hidden_size": 32,
  "num_layers": 4,
  "num_heads": 4,
  "intermediate_size": 64,
  "max_position_embeddings": 32,
}


def _random_teacher(directory, seed=0):
  """A converted-model workdir holding a random-init BERT (`BertForPreTraining` params)."""
  config = ModelConfig(**TEACHER)
  ids = jnp.zeros((1, 4), jnp.int32)
  params = jax.jit(BertForPreTraining(config).init)(jax.random.key(seed), ids, ids, ids + 1)
  directory.mkdir(parents=True)
  workdir_params.write_converted(
    directory, jax.device_get(nn.unbox(params)["params"]), config, source="test"
  )
  return directory


def _config(teacher, steps, **overrides):
  values = {
    "task": "distillation",
    "num_train_steps": steps,
    "global_batch_size": 8,
    "log_every_steps": 1,
    "eval_every_steps": 1000,
    "checkpoint_every_steps": 1,
    "max_checkpoints_to_keep": 10,
    "peak_flops_per_device": 1e12,
    "model.family": "distilbert",
    "model.size": "tiny",
    "model.num_layers": 2,
    "model.hidden_size": 32,
    "model.num_heads": 4,
    "model.intermediate_size": 64,
    "model.vocab_size": 8192,
    "model.max_position_embeddings": 32,
    "data.max_seq_length": 32,
    "data.max_predictions_per_seq": 5,
    "data.num_eval_examples": 8,
    "data.objective": "none",
    "optimizer.learning_rate": 1e-3,
    "optimizer.warmup_steps": 2,
    "distillation.teacher": str(teacher),
  }
  values.update(overrides)
  return finetune_fixtures.set_keys(base_config(), values)


def _record(workdir, step):
  return json.loads((workdir / "checkpoints" / str(step) / "data" / "metadata").read_text())


@pytest.fixture(scope="module")
def teachers(tmp_path_factory):
  root = tmp_path_factory.mktemp("teachers")
  return _random_teacher(root / "a", seed=0), _random_teacher(root / "b", seed=1)


def test_student_init_checkpoints_and_resume(teachers, small_corpus_keys, tmp_path):
  teacher, other_teacher = teachers
  workdir = tmp_path / "run"
  train_and_evaluate(
    _config(teacher, steps=3, **small_corpus_keys), str(workdir), helpers.one_device()
  )

  # Step 1's update has learning rate 0 (warmup): its params are the student's init.
  student = run_helpers.restore_params(workdir, 1)
  source = run_helpers.restore_params(teacher, 0)
  assert not any("token_type" in name or "pooler" in name for name in student)
  for name, value in student.items():
    # Student layer i is teacher layer 2i; embeddings and MLM head are the teacher's.
    teacher_name = re.sub(
      r"encoder/layer_(\d+)/", lambda m: f"encoder/layer_{2 * int(m.group(1))}/", name
    )
    np.testing.assert_array_equal(value, source[teacher_name], err_msg=name)
  assert {"bert/encoder/layer_0/output/kernel", "bert/encoder/layer_1/output/kernel"} < set(student)

  # The checkpoint holds the student's state only, and the teacher's identity.
  assert set(run_helpers.restore_params(workdir, 3)) == set(student)
  (record,) = {json.dumps(_record(workdir, step)["record"]) for step in (1, 2, 3)}
  identity = json.loads(record)["teacher"]
  assert identity["path"] == str((teacher / "checkpoints" / "0").resolve())
  assert len(identity["fingerprint"]) == 16

  # Killed after step 1's checkpoint: the resumed run ends bitwise where the first one did.
  uninterrupted = run_helpers.restore_params(workdir, 3)
  for step in (2, 3):
    shutil.rmtree(workdir / "checkpoints" / str(step))
  train_and_evaluate(
    _config(teacher, steps=3, **small_corpus_keys), str(workdir), helpers.one_device()
  )
  resumed = run_helpers.restore_params(workdir, 3)
  for name, value in uninterrupted.items():
    np.testing.assert_array_equal(resumed[name], value, err_msg=name)

  # Another teacher at the same path is refused by its fingerprint, before config.json (which
  # a longer run would rewrite) is touched.
  shutil.rmtree(teacher / "checkpoints")
  shutil.copytree(other_teacher / "checkpoints", teacher / "checkpoints")
  config_json = (workdir / "config.json").read_bytes()
  with pytest.raises(UserInputError, match=r"was written with teacher=.*resume with what wrote it"):
    train_and_evaluate(
      _config(teacher, steps=4, **small_corpus_keys), str(workdir), helpers.one_device()
    )
  assert (workdir / "config.json").read_bytes() == config_json


def _distillation_step(teacher, devices, **axes):
  # No warmup: the step's learning rate is the peak, so the student's params move.
  overrides = {"optimizer.warmup_steps": 0, **axes}
  return helpers.one_train_step(_config(teacher, steps=10, **overrides), devices)


@pytest.fixture(scope="module")
def single_device_distillation_step(teachers):
  # teachers[1]: test_student_init_checkpoints_and_resume rewrites teachers[0]'s checkpoint.
  return _distillation_step(teachers[1], jax.devices()[:1], **{"mesh.data": 1})


# One 8-device mesh: {"mesh.data": 1, "mesh.fsdp": 8} passes too, for ~25 s more.
@pytest.mark.parametrize("axes", [{"mesh.data": 2, "mesh.tensor": 4}], ids=["data2xtensor4"])
def test_sharded_distillation_step_equals_single_device(
  teachers, single_device_distillation_step, axes
):
  init_1, params_1, metrics_1, _ = single_device_distillation_step
  init_8, params_8, metrics_8, specs = _distillation_step(teachers[1], jax.devices(), **axes)
  assert any(any(axis is not None for axis in spec) for spec in specs), "nothing was sharded"
  # The same student init from the teacher (sharded on both meshes the same way).
  jax.tree.map(np.testing.assert_array_equal, init_1, init_8)
  # Every loss term and metric sum, the teacher's (soft CE, cosine) included.
  assert metrics_1["soft_ce"] > 0 and metrics_1["cosine_loss"] > 0, metrics_1
  assert set(metrics_8) == set(metrics_1)
  for key, value in metrics_1.items():
    np.testing.assert_allclose(metrics_8[key], value, rtol=2e-5, err_msg=key)
  moved = jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), params_1, init_1)
  assert max(jax.tree.leaves(moved)) > 1e-4, "the step did not change the student"
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )


def test_fingerprint_is_mesh_independent_and_sees_one_bit(teachers):
  run = workdir_params.read_run(str(teachers[0]))
  one = jax.device_put(run.params, jax.devices()[0])
  mesh = mesh_lib.make_mesh(MeshConfig(data=1, fsdp=8))
  spread = jax.tree.map(
    lambda x: jax.device_put(
      x,
      jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec("fsdp" if x.shape[0] % 8 == 0 else None)
      ),
    ),
    run.params,
  )
  assert teacher_lib.fingerprint(one, run.model) == teacher_lib.fingerprint(spread, run.model)
  flipped = jax.tree.map(np.copy, run.params)
  table = flipped["bert"]["embeddings"]["word_embeddings"]["embedding"]
  table.view(np.uint32)[7, 3] ^= 1
  assert teacher_lib.fingerprint(flipped, run.model) != teacher_lib.fingerprint(one, run.model)


def test_every_other_layer_needs_a_deep_enough_teacher():
  student = {"bert/encoder/layer_0/output/bias": (4,), "bert/encoder/layer_1/output/bias": (4,)}
  teacher = {"bert/encoder/layer_0/output/bias": (4,), "bert/encoder/layer_1/output/bias": (4,)}
  with pytest.raises(UserInputError, match="teacher has no bert/encoder/layer_2/output/bias"):
    teacher_lib.every_other_layer_map(student, teacher, teacher_layers=2)
  teacher["bert/encoder/layer_2/output/bias"] = (4,)
  mapping = teacher_lib.every_other_layer_map(student, teacher, teacher_layers=3)
  assert mapping["bert/encoder/layer_1/output/bias"] == ("bert/encoder/layer_2/output/bias", None)


CONFIG_ONLY = "<a directory holding only the teacher's config.json>"


@pytest.mark.parametrize(
  "overrides,expected",
  [
    (
      {"distillation.teacher": "/nonexistent/teacher"},
      "distillation.teacher=/nonexistent/teacher holds no checkpoint",
    ),
    ({"distillation.teacher": ""}, "task=distillation needs distillation.teacher"),
    ({"model.hidden_size": 64}, "match model.hidden_size or set distillation.cosine_weight=0"),
    ({"distillation.student_init": "copy"}, "distillation.student_init='copy' is unknown"),
    (
      {"distillation.teacher": CONFIG_ONLY},
      r"holds no checkpoint; .* its config.json alone is enough only for tools/aot_compile",
    ),
  ],
  ids=["missing_teacher", "no_teacher", "width", "student_init", "config_json_only"],
)
def test_bad_input_is_one_line(teachers, tmp_path, overrides, expected):
  if overrides.get("distillation.teacher") == CONFIG_ONLY:  # The teacher's config, no weights.
    (tmp_path / "teacher").mkdir()
    shutil.copy(teachers[1] / "config.json", tmp_path / "teacher")
    overrides = {"distillation.teacher": str(tmp_path / "teacher")}
  with pytest.raises(UserInputError, match=expected) as error:
    train_and_evaluate(
      _config(teachers[0], steps=1, **overrides), str(tmp_path / "run"), helpers.one_device()
    )
  assert "\n" not in str(error.value)
  assert not (tmp_path / "run").exists()


# The learning check: BERT-tiny (the session's pretrained fixture) distilled into a 1-layer
# DistilBERT student for STEPS steps, against the same student pretrained from scratch.
STEPS = 30
STUDENT = {
  **finetune_fixtures.model_overrides(),
  "model.family": "distilbert",
  "model.num_layers": 1,
  "model.hidden_size": 128,
  "model.num_heads": 2,
  "model.intermediate_size": 512,
  "num_train_steps": STEPS,
  "global_batch_size": 16,
  "log_every_steps": STEPS,
  "eval_every_steps": STEPS,
  "checkpoint_every_steps": STEPS,
  "data.max_seq_length": 64,
  "data.max_predictions_per_seq": 10,
  "data.num_eval_examples": 32,
  "data.objective": "none",
  "optimizer.warmup_steps": 4,
}


@pytest.fixture(scope="module")
def distilled_workdir(tiny_pretrained_workdir, tmp_path_factory):
  workdir = tmp_path_factory.mktemp("distilled")
  train_and_evaluate(
    _config(tiny_pretrained_workdir, STEPS, **STUDENT), str(workdir), helpers.one_device()
  )
  return workdir


@pytest.mark.optimized_xla
def test_distilled_student_beats_the_same_student_from_scratch(
  distilled_workdir, tiny_pretrained_workdir, tmp_path
):
  scratch = _config(tiny_pretrained_workdir, STEPS, **STUDENT, task="pretraining")
  train_and_evaluate(scratch, str(tmp_path), helpers.one_device())
  (distilled,) = run_helpers.read_metrics(distilled_workdir, "eval")
  (from_scratch,) = run_helpers.read_metrics(tmp_path, "eval")
  assert distilled["step"] == from_scratch["step"] == STEPS
  assert distilled["mlm_loss"] < from_scratch["mlm_loss"] - 0.3, (distilled, from_scratch)
  assert np.isfinite([distilled["soft_ce"], distilled["cosine_loss"]]).all()


@pytest.mark.optimized_xla
def test_glue_fine_tuning_from_the_distilled_student(distilled_workdir, tmp_path):
  train, dev = finetune_fixtures.write_mrpc_files(tmp_path)
  model = {k: v for k, v in STUDENT.items() if k.startswith("model.")}
  values = dict(
    model,
    init_from=str(distilled_workdir),
    num_train_epochs=0.0,
    num_train_steps=40,
    global_batch_size=32,
    log_every_steps=40,
    eval_every_steps=40,
    checkpoint_every_steps=40,
    peak_flops_per_device=1e12,
    **{
      "data.glue_task": "mrpc",
      "data.train_path": train,
      "data.eval_path": dev,
      "data.max_seq_length": 64,
      "optimizer.learning_rate": 3e-3,  # One layer, no token types: a larger step.
    },
  )
  config = finetune_fixtures.set_keys(finetune_config("classification"), values)
  train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  (row,) = run_helpers.read_metrics(tmp_path / "run", "eval")
  assert row["accuracy"] > 0.7, row  # Chance: 0.5.


def test_teacher_of_another_vocab_is_one_line(teachers):
  student = ModelConfig(**dict(TEACHER, vocab_size=30522, num_layers=2))
  with pytest.raises(UserInputError, match="has vocab_size=8192 but the student's") as error:
    distillation.read_teacher(str(teachers[0]), student)
  assert "\n" not in str(error.value)


def test_embed_reads_the_distilled_student(distilled_workdir, tmp_path):
  (tmp_path / "lines.txt").write_text("the cat sat on the mat\nhello world ||| a second one\n")
  argv = [
    "embed",
    f"--checkpoint={distilled_workdir}",
    f"--input={tmp_path / 'lines.txt'}",
    f"--output={tmp_path / 'e.npz'}",
    "--layers=-1",
    "--pooling=cls",
  ]
  assert embed.main(argv) == 0
  arrays = np.load(tmp_path / "e.npz")
  run = workdir_params.read_run(str(distilled_workdir))
  mask = (np.arange(arrays["input_ids"].shape[1])[None] < arrays["lengths"][:, None]).astype(
    np.int32
  )
  hidden, _ = DistilBertEncoder(run.model, with_pooler=False).apply(
    {"params": run.params["bert"]}, arrays["input_ids"], arrays["token_type_ids"], mask
  )
  np.testing.assert_allclose(arrays["embeddings"][:, 0], hidden[:, 0], atol=1e-5)
