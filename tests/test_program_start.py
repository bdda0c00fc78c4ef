"""What the `bert-jax train` program loads at start: TensorFlow for tf.data, without the Keras
that TensorFlow would import with itself (and the matplotlib and scikit-learn that Keras brings)
or the fine-tuning metrics' scipy.stats, which together add about 3 s to every run's start."""

import json
import subprocess
import sys

from tests import run_helpers

# Runs the program's entry point as `python -m bert_jax.main` does and, at exit, prints which of
# these modules the process imported.
_REPORTING_MAIN = """
import atexit, json, sys
WATCHED = {"keras", "matplotlib", "sklearn", "scipy.stats", "tensorflow"}
atexit.register(lambda: print(json.dumps(sorted(WATCHED & set(sys.modules)))))
from bert_jax import main
main.main(sys.argv)
"""


def test_a_run_imports_tensorflow_but_not_keras_matplotlib_scikit_learn_or_scipy_stats(tmp_path):
  flags = run_helpers.quick_flags(tmp_path, num_train_steps=1, checkpoint_every_steps=1)
  child = subprocess.run(
    [sys.executable, "-c", _REPORTING_MAIN, *run_helpers.main_command(tmp_path, flags)[3:]],
    env=run_helpers.env(),
    cwd=run_helpers.REPO,
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  assert child.returncode == 0, child.stderr[-3000:]
  assert run_helpers.read_metrics(tmp_path)[-1]["step"] == 1
  assert json.loads(child.stdout.strip().splitlines()[-1]) == ["tensorflow"]
