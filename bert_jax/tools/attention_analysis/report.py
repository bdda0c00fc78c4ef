"""The analysis as files: a JSON record, a CSV table (one row per head) and a text summary.

Layers and heads are numbered from 1 in every output, as the paper names heads ("8-10" =
layer 8, head 10).
"""

import csv
import io
import json

import numpy as np

from bert_jax.tools.attention_analysis import relations as relations_lib


def head_name(layer: int, head: int) -> str:
  """The paper's name of a 0-based (layer, head): ``layer-head`` counted from 1."""
  return f"{layer + 1}-{head + 1}"


def best_heads(results: dict) -> list:
  """Per relation its best head over both directions: dicts, in `results`' order.

  Each dict: relation, count, direction, layer, head (0-based), accuracy, and the
  baseline's offset and accuracy in that direction.
  """
  rows = []
  for relation, result in results.items():
    direction = max(
      relations_lib.DIRECTIONS,
      key=lambda d: (result.accuracy[d][result.best(d)], d == relations_lib.DEP_TO_HEAD),
    )
    layer, head = result.best(direction)
    baseline = result.baseline[direction]
    rows.append(
      {
        "relation": relation,
        "count": result.count,
        "direction": direction,
        "layer": layer,
        "head": head,
        "accuracy": float(result.accuracy[direction][layer, head]),
        "baseline_offset": baseline.offset,
        "baseline_accuracy": baseline.accuracy,
      }
    )
  return rows


def as_json(results: dict, statistics: dict, about: dict) -> dict:
  """Everything as one JSON object: ``about`` (model, sentences), relations, statistics."""
  return {
    **about,
    "relations": {
      relation: {
        "count": result.count,
        **{
          direction: {
            "accuracy": np.round(result.accuracy[direction], 6).tolist(),
            "baseline": {
              "offset": result.baseline[direction].offset,
              "accuracy": result.baseline[direction].accuracy,
            },
          }
          for direction in relations_lib.DIRECTIONS
        },
      }
      for relation, result in results.items()
    },
    "statistics": {name: np.round(grid, 6).tolist() for name, grid in statistics.items()},
    "best_heads": [
      {**row, "layer": row["layer"] + 1, "head": row["head"] + 1} for row in best_heads(results)
    ],
  }


def write_json(path, record: dict):
  """Writes `as_json`'s record."""
  path.write_text(json.dumps(record, indent=1) + "\n")


def write_csv(path, results: dict, statistics: dict):
  """One row per layer and head: each general statistic, then each relation's accuracy in
  each direction (``<relation>:<direction>``)."""
  columns = [
    *statistics,
    *(f"{r}:{d}" for r in results for d in relations_lib.DIRECTIONS),
  ]
  grids = [
    *statistics.values(),
    *(results[r].accuracy[d] for r in results for d in relations_lib.DIRECTIONS),
  ]
  num_layers, num_heads = next(iter(statistics.values())).shape
  text = io.StringIO()  # epath's files take no newline=, which csv needs.
  writer = csv.writer(text, lineterminator="\n")
  writer.writerow(["layer", "head", *columns])
  for layer in range(num_layers):
    for head in range(num_heads):
      values = (f"{grid[layer, head]:.6f}" for grid in grids)
      writer.writerow([layer + 1, head + 1, *values])
  path.write_text(text.getvalue())


def summary(results: dict, about: dict, min_count: int = 1) -> str:
  """The best head per relation beside the fixed-offset baseline, as a text table.

  Args:
    results: relation -> `relations.RelationResult`.
    about: the model and sentence counts of `as_json`'s record.
    min_count: relations with fewer dependencies are left out (their number is said).
  """
  sentences = about["sentences"]
  rare = sum(result.count < min_count for result in results.values())
  lines = [
    f"{sentences['analyzed']} of {sentences['read']} sentences analysed "
    f"({sentences['too_long']} longer than the model's {about['model']['max_positions']} "
    f"positions and {sentences['empty_word']} with a word of no token skipped)",
    "",
    f"{'relation':<14} {'count':>6}  {'head':>6}  {'direction':<9} {'accuracy':>8}  "
    f"{'baseline':>8}  {'offset':>6}",
  ]
  for row in best_heads(results):
    if row["count"] < min_count:
      continue
    lines.append(
      f"{row['relation']:<14} {row['count']:>6}  {head_name(row['layer'], row['head']):>6}  "
      f"{row['direction']:<9} {row['accuracy']:>8.1%}  {row['baseline_accuracy']:>8.1%}  "
      f"{row['baseline_offset']:>+6d}"
    )
  if rare:
    lines.append(f"({rare} relations with fewer than {min_count} dependencies not shown)")
  return "\n".join(lines) + "\n"
