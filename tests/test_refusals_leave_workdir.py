"""A refused run leaves its workdir byte-identical: the same files with the same bytes (a new
workdir is not created), exit status 2 and one ``error:`` line, whatever the refusal.

Each case runs `bert_jax.main` in-process on its own copy of a finished two-step fine-tuning run
(a tiny classifier with labels neg, pos) or on a fresh workdir.
"""

import hashlib
import json
import os
import pathlib
import shutil
import socket
import sys
import time

import pytest

from bert_jax import main
from tests import finetune_fixtures, run_helpers

CONFIG = f"--config={run_helpers.REPO}/configs/finetune/classification.py"
# Keep jax's process-wide compilation cache settings alone (main would point them at a workdir).
# In-process the programs a refused run compiles before its commit point are already in memory,
# so the cache's ordering (opened after config.json) cannot show here.
NO_CACHE = "--config.compilation_cache_dir="
TINY_MODEL = {
  "model.hidden_size": 32,
  "model.num_layers": 1,
  "model.num_heads": 2,
  "model.intermediate_size": 64,
  "model.vocab_size": 8192,
  "model.max_position_embeddings": 64,
}


def _flags(train, dev, **overrides):
  values = {
    **TINY_MODEL,
    "data.train_path": train,
    "data.eval_path": dev,
    "data.label_names": "neg,pos",
    "data.max_seq_length": 32,
    "num_train_epochs": 0,
    "num_train_steps": 2,
    "global_batch_size": 8,
    "log_every_steps": 2,
    "eval_every_steps": 2,
    "checkpoint_every_steps": 2,
    **overrides,
  }
  return [CONFIG, NO_CACHE, *(f"--config.{key}={value}" for key, value in values.items())]


def _main(workdir, flags):
  sys.modules.pop("config_config", None)  # config_flags re-executes config files into it.
  return main.run(["main", f"--workdir={workdir}", *flags])


def _snapshot(directory: pathlib.Path):
  """{relative path: sha256 of a file, or "dir"}; None when ``directory`` does not exist."""
  if not directory.exists():
    return None
  return {
    str(p.relative_to(directory)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).digest()
    for p in sorted(directory.rglob("*"))
  }


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """(workdir of a finished neg/pos run, train file, dev file)."""
  root = tmp_path_factory.mktemp("refusals")
  paths = []
  for source in finetune_fixtures.write_mrpc_files(root, num_train=32, num_eval=16):
    rows = pathlib.Path(source).read_text(encoding="utf-8-sig").splitlines()[1:]
    lines = ["text\tlabel"] + [
      f"{row.split(chr(9))[3]}\t{'pos' if row[0] == '1' else 'neg'}" for row in rows
    ]
    path = root / f"custom_{pathlib.Path(source).name}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    paths.append(str(path))
  workdir = root / "run"
  assert _main(workdir, _flags(*paths)) == 0
  assert run_helpers.checkpoint_steps(workdir) == [2]
  return workdir, *paths


def _hold_lock(workdir):
  """A live run's lock: this process, renewed just now."""
  now = time.time()
  holder = dict(
    host=socket.gethostname(), pid=os.getpid(), started=now, renewed=now, lease_secs=300.0,
    command="python -m bert_jax.main (the other run)",
  )  # fmt: skip
  (workdir / "run.lock").write_text(json.dumps(holder))


def _damage(workdir):
  for path in (workdir / "checkpoints" / "2" / "state").rglob("*"):
    if path.is_file():
      path.write_bytes(b"")


def _mark_converted(workdir):
  config = json.loads((workdir / "config.json").read_text())
  config["converted_from"] = "hf:bert-base-uncased"
  (workdir / "config.json").write_text(json.dumps(config))


# (id, how the copy of the finished run is prepared, flag overrides, text of the error line).
# "new" runs into a workdir that does not exist yet; "{source}" in a value is the finished run.
CASES = [
  ("more_labels", None, {"data.label_names": "neg,pos,mid"}, "classifier/bias of shape (2,)"),
  ("another_model", None, {"model.hidden_size": 64}, "holds a run with model.hidden_size=32"),
  ("labels_not_in_file", None, {"data.label_names": "neg,mid"}, "label 'pos' is not one of"),
  ("lock_held", _hold_lock, {}, "is in use by the run of pid"),
  ("damaged_checkpoint", _damage, {}, "none of the 1 checkpoints"),
  ("converted_weights", _mark_converted, {}, "holds converted weights"),
  (
    "new_workdir_init_from_misfit",
    "new",
    {"init_from": "{source}", "model.hidden_size": 64},
    "does not fit this model",
  ),
  (
    "new_workdir_labels_not_in_file",
    "new",
    {"data.label_names": "neg,mid"},
    "label 'pos' is not one of",
  ),
]


@pytest.mark.parametrize("case_id,prepare,overrides,expected", CASES, ids=[c[0] for c in CASES])
def test_refused_run_leaves_the_workdir_byte_identical(
  finished, tmp_path, capsys, case_id, prepare, overrides, expected
):
  source, train, dev = finished
  workdir = tmp_path / case_id
  overrides = {k: str(v).replace("{source}", str(source)) for k, v in overrides.items()}
  if prepare != "new":
    shutil.copytree(source, workdir)
    if prepare is not None:
      prepare(workdir)
  before = _snapshot(workdir)
  capsys.readouterr()
  status = _main(workdir, _flags(train, dev, **overrides))
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.startswith("error:")]
  assert status == 2, err[-2000:]
  assert len(lines) == 1 and expected in lines[0], err[-2000:]
  assert err.strip().splitlines()[-1] == lines[0]
  assert _snapshot(workdir) == before
