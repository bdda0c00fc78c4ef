"""GLUE leaderboard prediction files: ``<TASK>.tsv`` with the header ``index<TAB>prediction``.

The leaderboard (gluebenchmark.com) takes one TSV per task, named as `leaderboard_name` gives
(CoLA.tsv, SST-2.tsv, MRPC.tsv, STS-B.tsv, QQP.tsv, MNLI-m.tsv, MNLI-mm.tsv, QNLI.tsv, RTE.tsv,
WNLI.tsv, AX.tsv for MNLI's diagnostic set), a row per test example: its ``index`` and the
predicted label as GLUE spells it (entailment / not_entailment / neutral / contradiction, 0 / 1
for CoLA, SST-2, MRPC, QQP and WNLI) or, for STS-B, the score with three decimals. Custom
tasks use the same format in ``test.tsv`` with their ``data.label_names``.
"""

import numpy as np

from bert_jax.tasks.classification.reader import GlueLayout

_LEADERBOARD_NAMES = {
  "cola": "CoLA",
  "sst2": "SST-2",
  "mrpc": "MRPC",
  "qqp": "QQP",
  "stsb": "STS-B",
  "qnli": "QNLI",
  "rte": "RTE",
  "wnli": "WNLI",
}


def leaderboard_name(glue_task: str, test_path: str) -> str:
  """The file stem the leaderboard expects for ``glue_task`` ("test" for custom tasks).

  MNLI has three test sets, told apart by GLUE's file names: ``test_mismatched.tsv`` ->
  MNLI-mm, ``diagnostic.tsv`` (or ``AX.tsv``) -> AX, any other (``test_matched.tsv``) -> MNLI-m.
  """
  if glue_task != "mnli":
    return _LEADERBOARD_NAMES.get(glue_task, "test")
  stem = test_path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
  if "mismatched" in stem:
    return "MNLI-mm"
  return "AX" if stem in ("diagnostic", "ax") else "MNLI-m"


def predicted_labels(layout: GlueLayout, logits_NC) -> list[str]:
  """Each row's prediction as the leaderboard spells it: a label name, or a score (%.3f)."""
  logits_NC = np.asarray(logits_NC)
  if not layout.label_names:
    return [f"{score:.3f}" for score in logits_NC[:, 0].astype(np.float64)]
  return [layout.label_names[i] for i in np.argmax(logits_NC, -1)]


def predictions_tsv(ids, labels) -> str:
  """The leaderboard TSV: ``index<TAB>prediction``, then one ``id<TAB>label`` line per row."""
  return "".join(
    f"{i}\t{label}\n" for i, label in zip(["index", *ids], ["prediction", *labels], strict=True)
  )
