"""Which heads track which dependency relation, against the fixed-offset baseline.

Clark et al. (2019, section 4.2): a head "predicts" a word's syntactic partner by the other
word of the sentence it pays the most word-level attention to. Every dependency (a word, its
head, the relation between them; the root is none) is scored once in each direction:

- dependent -> head: the dependent's most-attended other word is its head;
- head -> dependent: the head's most-attended other word is one of its dependents by that
  relation (any of them: one argmax cannot name two).

Ties go to the earlier word. The baseline of a relation and direction always predicts the
word at the relation's most common relative position from the source word (ties: the
nearer offset, then the one to the left); a position outside the sentence is wrong.
"""

import collections
import dataclasses

import numpy as np

DEP_TO_HEAD = "dep2head"
HEAD_TO_DEP = "head2dep"
DIRECTIONS = (DEP_TO_HEAD, HEAD_TO_DEP)


@dataclasses.dataclass(frozen=True)
class Baseline:
  """The fixed-offset baseline of one relation and direction."""

  offset: int  # Target position minus source position.
  accuracy: float


@dataclasses.dataclass(frozen=True)
class RelationResult:
  """One relation's scores over the sentences analysed."""

  count: int  # Dependencies with this relation.
  accuracy: dict  # Direction -> [layers, heads] float accuracy of each head.
  baseline: dict  # Direction -> `Baseline`.

  def best(self, direction: str):
    """(layer, head) 0-based of the most accurate head in ``direction`` (the first if tied)."""
    grid = self.accuracy[direction]
    layer, head = np.unravel_index(np.argmax(grid), grid.shape)
    return int(layer), int(head)


def _dependencies(sentence):
  """(dependent, head, relation, dependents of that head by that relation) of a sentence."""
  dependents = collections.defaultdict(set)
  for word, (head, relation) in enumerate(zip(sentence.heads, sentence.relations)):
    if head >= 0:
      dependents[head, relation].add(word)
  return [
    (word, head, relation, frozenset(dependents[head, relation]))
    for word, (head, relation) in enumerate(zip(sentence.heads, sentence.relations))
    if head >= 0
  ]


def most_attended(word_maps_XWW) -> np.ndarray:
  """[..., W] int: each word's most-attended other word (the earliest if tied)."""
  maps = np.array(word_maps_XWW, np.float32)
  size = maps.shape[-1]
  maps[..., np.arange(size), np.arange(size)] = -np.inf
  return np.argmax(maps, axis=-1)


def _best_offset(offsets: collections.Counter) -> int:
  return min(offsets, key=lambda offset: (-offsets[offset], abs(offset), offset))


class RelationScores:
  """Accumulates every head's relation predictions, sentence by sentence."""

  def __init__(self, num_layers: int, num_heads: int):
    self._shape = (num_layers, num_heads)
    self._correct = collections.defaultdict(lambda: np.zeros(self._shape, np.int64))
    self._dependencies = collections.defaultdict(list)  # Relation -> [(dep, head, deps)].

  def add(self, sentence, word_maps_NHWW):
    """Scores one sentence.

    Args:
      sentence: a `conllu.Sentence`.
      word_maps_NHWW: [layers, heads, W, W] its word-level attention (`word_maps.word_level`).
    """
    predicted_NHW = most_attended(word_maps_NHWW)
    for dependent, head, relation, dependents in _dependencies(sentence):
      self._correct[relation, DEP_TO_HEAD] += predicted_NHW[:, :, dependent] == head
      self._correct[relation, HEAD_TO_DEP] += np.isin(predicted_NHW[:, :, head], list(dependents))
      self._dependencies[relation].append((dependent, head, dependents))

  def results(self) -> dict:
    """Relation -> `RelationResult`, the most frequent relation first (then by name)."""
    results = {}
    for relation in sorted(self._dependencies, key=lambda r: (-len(self._dependencies[r]), r)):
      dependencies = self._dependencies[relation]
      count = len(dependencies)
      results[relation] = RelationResult(
        count=count,
        accuracy={d: self._correct[relation, d] / count for d in DIRECTIONS},
        baseline=_baselines(dependencies),
      )
    return results


def _baselines(dependencies) -> dict:
  to_head = collections.Counter(head - dep for dep, head, _ in dependencies)
  to_dependent = collections.Counter(dep - head for dep, head, _ in dependencies)
  offset_to_head, offset_to_dependent = _best_offset(to_head), _best_offset(to_dependent)
  hits_to_head = sum(dep + offset_to_head == head for dep, head, _ in dependencies)
  hits_to_dependent = sum(head + offset_to_dependent in deps for _, head, deps in dependencies)
  count = len(dependencies)
  return {
    DEP_TO_HEAD: Baseline(offset_to_head, hits_to_head / count),
    HEAD_TO_DEP: Baseline(offset_to_dependent, hits_to_dependent / count),
  }
