"""Exports one task of a multi-task run as a single-task workdir.

  python -m bert_jax.tools.export_task --workdir=/runs/mt --task=mrpc --output=/runs/mt_mrpc

The output is an ordinary workdir: ``config.json`` (the single-task config of the member:
``task`` its type, ``data`` its data section, the run's model and other keys, and
``exported_from``), ``vocab.txt`` (the run's WordPiece vocab, when it has one) and
``checkpoints/<step>/state`` holding ``{"params": {"bert": trunk, <head>: ...}}``, the layout
of the member's single-task model. ``--config.init_from=<output>`` with that task's ordinary
config (e.g. ``configs/finetune/glue.py:mrpc``) restores the trunk and the head, to evaluate
or fine-tune further. Bad input prints one ``error:`` line and exits with status 2; nothing is
written then.
"""

import dataclasses
import json
import shutil

import orbax.checkpoint as ocp
from absl import flags
from etils import epath

from bert_jax import names
from bert_jax import workdir as workdir_lib
from bert_jax.cli import runner
from bert_jax.errors import UserInputError
from bert_jax.tasks import registry, trunk
from bert_jax.tasks.multitask.config import MultitaskDataConfig
from bert_jax.tools import workdir_params


def _define_flags(flag_values: flags.FlagValues):
  define = {"flag_values": flag_values}
  flags.DEFINE_string("workdir", None, "The multi-task run (workdir or checkpoint).", **define)
  flags.DEFINE_string("task", None, "The member to export (its name under data.tasks).", **define)
  flags.DEFINE_string("output", None, "The single-task workdir to write (new or empty).", **define)


def single_task_params(params: dict, name: str) -> dict:
  """The member's single-task model params: the shared trunk and its own head(s)."""
  return {trunk.NAME: params[trunk.NAME], **params[name]}


def export_task(workdir: str, name: str, output: str) -> epath.Path:
  """Writes member ``name`` of the multi-task run in ``workdir`` as a workdir at ``output``.

  Raises:
    UserInputError: ``workdir`` is no multi-task run, has no member ``name``, or ``output``
      exists and is not empty.
  """
  out = epath.Path(output)
  if out.exists() and (not out.is_dir() or any(out.iterdir())):
    raise UserInputError(f"--output={output} exists and is not empty; choose a new directory")
  run = workdir_params.read_run(workdir, flag="--workdir")
  if run.config.get("task") != names.MULTITASK:
    raise UserInputError(
      f"{workdir} holds a {run.config.get('task')!r} run, not a multitask one; its "
      "checkpoint is already a single-task model (use it as init_from directly)"
    )
  data = MultitaskDataConfig(**run.config["data"])
  member = data.member(name)
  source = workdir_lib.of_checkpoint(run.step_dir)
  vocab = registry.resolve_vocab_path(
    source.resolve(data.vocab_path), source.resolve(run.config.get("init_from", ""))
  )
  out.mkdir(parents=True, exist_ok=True)
  member_data = dataclasses.asdict(member.data)
  if vocab.endswith(".txt"):
    shutil.copyfile(vocab, out / workdir_params.VOCAB_FILE)
    vocab = str((out / workdir_params.VOCAB_FILE).resolve())
  member_data["vocab_path"] = vocab
  config = dict(run.config, task=member.task, data=member_data)
  config["exported_from"] = {
    "workdir": str(source.path.resolve()),
    "task": name,
    "step": int(run.step_dir.name),
  }
  (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
  with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as checkpointer:
    checkpointer.save(
      out.resolve() / "checkpoints" / run.step_dir.name / "state",
      args=ocp.args.StandardSave({"params": single_task_params(run.params, name)}),
    )
  print(
    f"wrote {member.task} workdir {output} (task {name!r} of {source.path}, step {run.step_dir.name})"
  )
  return out


def _export(values: flags.FlagValues):
  for flag in ("workdir", "task", "output"):
    if not values[flag].value:
      raise UserInputError(f"--{flag} is required")
  export_task(values["workdir"].value, values["task"].value, values["output"].value)


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _export, argv)


if __name__ == "__main__":
  raise SystemExit(main())
