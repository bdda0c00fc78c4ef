"""The two layouts of an encoder's layers, and moving parameters between them for init_from.

Unscanned, layer i's parameters live under ``.../encoder/layer_<i>/...``; with
``model.scan_layers`` they are stacked on a leading axis under ``.../encoder/layers/block/...``
(`bert_jax.models.encoder.Encoder`). A checkpoint of either layout initialises a model of the
other: layer i of the stack is ``layer_<i>``, nothing else changes, so the outputs are equal.
"""

import re

import numpy as np

SCANNED = "scanned"
UNSCANNED = "unscanned"
_LAYER = re.compile(r"^(.*/encoder/)layer_(\d+)/(.*)$")
_STACK = re.compile(r"^(.*/encoder/)layers/block/(.*)$")


def layout(paths) -> str | None:
  """SCANNED or UNSCANNED by the encoder parameter names in ``paths``; None if it has none."""
  for path in paths:
    if _STACK.match(path):
      return SCANNED
    if _LAYER.match(path):
      return UNSCANNED
  return None


def _unscanned_groups(paths):
  """{stacked path: [layer_0 path, layer_1 path, ...]} of the unscanned layer parameters;
  a parameter missing from some layer (another depth per leaf) is left out."""
  by_leaf = {}
  for path in paths:
    match = _LAYER.match(path)
    if match:
      prefix, index, leaf = match.groups()
      by_leaf.setdefault(f"{prefix}layers/block/{leaf}", {})[int(index)] = path
  return {
    stacked: [layers[i] for i in range(len(layers))]
    for stacked, layers in by_leaf.items()
    if sorted(layers) == list(range(len(layers)))
  }


def _split_paths(stacked_path, num_layers):
  prefix, leaf = _STACK.match(stacked_path).groups()
  return [f"{prefix}layer_{i}/{leaf}" for i in range(num_layers)]


def convert_shapes(shapes: dict, to_layout: str) -> dict:
  """{path: shape} of parameters as they would be in ``to_layout`` (others unchanged).

  Unscanned layers whose shapes differ do not stack: they keep their names, so the usual
  mismatch report names them.
  """
  out = {p: tuple(s) for p, s in shapes.items() if not (_LAYER.match(p) or _STACK.match(p))}
  if to_layout == SCANNED:
    grouped = set()
    for stacked, layer_paths in _unscanned_groups(shapes).items():
      layer_shapes = {tuple(shapes[p]) for p in layer_paths}
      if len(layer_shapes) == 1:
        out[stacked] = (len(layer_paths), *layer_shapes.pop())
        grouped.update(layer_paths)
    out.update({p: tuple(s) for p, s in shapes.items() if _LAYER.match(p) and p not in grouped})
  else:
    for path, shape in shapes.items():
      if _STACK.match(path):
        out.update(dict.fromkeys(_split_paths(path, shape[0]), tuple(shape[1:])))
      elif _LAYER.match(path):
        out[path] = tuple(shape)
  return out


def convert_arrays(arrays: dict, to_layout: str) -> dict:
  """{path: numpy array} of stored parameters, in ``to_layout`` (stacked or split by layer)."""
  out = {}
  if to_layout == SCANNED:
    for stacked, layer_paths in _unscanned_groups(arrays).items():
      out[stacked] = np.stack([np.asarray(arrays[p]) for p in layer_paths])
    out.update({p: v for p, v in arrays.items() if not _LAYER.match(p)})
    return out
  for path, value in arrays.items():
    if _STACK.match(path):
      value = np.asarray(value)
      out.update(zip(_split_paths(path, value.shape[0]), value))
    else:
      out[path] = value
  return out
