"""Host batches of fine-tuning features held as numpy arrays; shared by every fine-tuning task.

A task's data object (see `FeatureData`) turns its examples into feature arrays once (leading
dimension = feature) and gets the trainer's batching contract from here:

* ``train`` repeats epochs forever, each a permutation of the features seeded by
  ``(seed, epoch)``. The position is the number of global rows consumed; global batch ``k``
  after start position ``s`` holds rows ``[s + k*B, s + (k+1)*B)`` of that endless sequence, so
  a run resumed at a saved position continues exactly.
* ``eval`` and ``test`` are finite: every feature exactly once, in order, the last global
  batch padded with copies of feature 0 whose ``example_weight`` is 0 and ``row_id`` is -1.
  ``test`` rows (unlabelled, e.g. GLUE's test.tsv) carry zero labels; only their predictions
  are used.
* Host sharding: process ``p`` of ``n`` takes rows ``[p*b, (p+1)*b)`` of each global batch
  (``b = B / n``).
* Every row carries ``row_id`` (int32, the feature's index; -1 for padding) and
  ``example_weight`` (float32, 1 for real rows).

Tasks subclass `FeatureData` and implement ``eval_metrics``; see
`bert_jax.tasks.classification.data`. Tasks with prediction files (GLUE's leaderboard TSVs,
SQuAD's predictions.json) override ``evaluate`` and ``test_prediction_files``; the trainer
writes the files they return under ``<workdir>/predictions/``.
"""

import abc

import numpy as np

from bert_jax.errors import UserInputError

SPLITS = ("train", "eval", "test")


def _num_rows(arrays, what):
  if not arrays:
    return 0
  sizes = {name: len(array) for name, array in arrays.items()}
  if len(set(sizes.values())) != 1:
    raise ValueError(f"{what} feature arrays differ in length: {sizes}")
  return next(iter(sizes.values()))


class FeatureBatches:
  """An iterator of host batches with the resumable ``position`` (global rows consumed)."""

  def __init__(
    self, arrays, *, split, seed, global_batch_size, process_index, process_count, start_position=0
  ):
    self._arrays = arrays
    self._num_rows = _num_rows(arrays, split)
    self._split, self._seed = split, seed
    self._global_batch_size = global_batch_size
    self._host_batch_size = global_batch_size // process_count
    self._host_offset = process_index * self._host_batch_size
    self._order_epoch, self._order = None, None
    self.position = start_position

  def __iter__(self):
    return self

  def _train_rows(self, global_rows):
    """Feature indices of endless-sequence positions (one epoch's permutation at a time)."""
    epochs, offsets = np.divmod(global_rows, self._num_rows)
    rows = np.empty_like(global_rows)
    for epoch in np.unique(epochs):
      if epoch != self._order_epoch:
        self._order_epoch = epoch
        self._order = np.random.default_rng([self._seed, int(epoch)]).permutation(self._num_rows)
      rows[epochs == epoch] = self._order[offsets[epochs == epoch]]
    return rows

  def __next__(self):
    start = self.position + self._host_offset
    global_rows = np.arange(start, start + self._host_batch_size)
    if self._split == "train":
      rows = self._train_rows(global_rows)
      real = np.ones(len(rows), bool)
    else:
      if self.position >= self._num_rows:
        raise StopIteration
      real = global_rows < self._num_rows
      rows = np.where(real, global_rows, 0)
    self.position += self._global_batch_size
    batch = {name: array[rows] for name, array in self._arrays.items()}
    batch["row_id"] = np.where(real, rows, -1).astype(np.int32)
    batch["example_weight"] = real.astype(np.float32)
    return batch


class FeatureData(abc.ABC):
  """Train and eval features of one task, batched by the shared contract above.

  Subclasses set the feature arrays in ``__init__`` (through this constructor) and implement
  ``eval_metrics(predictions)``, which gets every eval row's predictions ordered by ``row_id``.
  """

  def __init__(self, train_arrays, eval_arrays, test_arrays=None):
    """Keeps the feature arrays.

    Args:
      train_arrays: {name: array [F_train, ...]} of model-facing train features.
      eval_arrays: {name: array [F_eval, ...]} of eval features with the same names.
      test_arrays: {name: array [F_test, ...]} of unlabelled test features (zero labels), or
        None when the run has no test set.

    Raises:
      UserInputError: a split holds no feature.
    """
    splits = (("train", train_arrays), ("eval", eval_arrays))
    for split, arrays in splits + ((("test", test_arrays),) if test_arrays is not None else ()):
      if not _num_rows(arrays, split):
        raise UserInputError(
          f"the {split} data holds no example; check data.{split}_path or data.tfds_*_split"
        )
    self.train_arrays = train_arrays
    self.eval_arrays = eval_arrays
    self.test_arrays = test_arrays

  @property
  def num_train_examples(self) -> int:
    """Rows of one training epoch (features: a long SQuAD document gives several)."""
    return _num_rows(self.train_arrays, "train")

  @property
  def num_eval_examples(self) -> int:
    return _num_rows(self.eval_arrays, "eval")

  def batches(self, split, seed, global_batch_size, process_index, process_count, start_position=0):
    """Host batches of ``split`` ("train": endless; "eval": finite, padded)."""
    if split not in SPLITS:
      raise ValueError(f"split={split!r}; choose one of {SPLITS}")
    arrays = {"train": self.train_arrays, "eval": self.eval_arrays, "test": self.test_arrays}[split]
    if arrays is None:
      raise ValueError("this run has no test split (data.test_path is empty)")
    return FeatureBatches(
      arrays,
      split=split,
      seed=seed,
      global_batch_size=global_batch_size,
      process_index=process_index,
      process_count=process_count,
      start_position=start_position,
    )

  @abc.abstractmethod
  def eval_metrics(self, predictions):
    """The task's official eval metrics from all eval rows' predictions (ordered by row_id)."""

  def evaluate(self, predictions):
    """Eval metrics and the eval prediction files, from all eval rows' predictions.

    Args:
      predictions: {name: array [F_eval, ...]}, rows ordered by row_id.

    Returns:
      ({metric: value}, {file name relative to ``<workdir>/predictions/``: text}); tasks
      without eval prediction files return no files.
    """
    return self.eval_metrics(predictions), {}

  def test_prediction_files(self, predictions):
    """{file name relative to ``<workdir>/predictions/``: text} of the test predictions.

    Args:
      predictions: {name: array [F_test, ...]}, rows ordered by row_id.

    Raises:
      UserInputError: the task has no test-prediction format (only classification has one).
    """
    del predictions
    raise UserInputError(
      f"{type(self).__name__} writes no test predictions (only classification does); "
      "unset data.test_path"
    )
