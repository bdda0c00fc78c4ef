"""The pictures: layers x heads grids and word-by-word attention heatmaps (matplotlib, Agg)."""

import re

import matplotlib

matplotlib.use("Agg")  # Files only: no display on servers and in tests.

from matplotlib import pyplot as plt  # After the backend is chosen.

# Values are written into the cells of grids at most this wide (BERT-base's 12 heads fit).
_ANNOTATED_HEADS = 16


def file_stem(name: str) -> str:
  """A relation or statistic name as a file name ("nmod:poss" -> "nmod_poss")."""
  return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _grid(axes, values_NH, title: str, vmin, vmax, figure):
  image = axes.imshow(values_NH, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
  num_layers, num_heads = values_NH.shape
  axes.set_xticks(range(num_heads), [str(h + 1) for h in range(num_heads)])
  axes.set_yticks(range(num_layers), [str(n + 1) for n in range(num_layers)])
  axes.set_xlabel("head")
  axes.set_ylabel("layer")
  axes.set_title(title, fontsize=9)
  if num_heads <= _ANNOTATED_HEADS:
    for layer in range(num_layers):
      for head in range(num_heads):
        axes.text(
          head,
          layer,
          f"{values_NH[layer, head]:.2f}",
          ha="center",
          va="center",
          fontsize=6,
          color="white",
        )
  figure.colorbar(image, ax=axes, shrink=0.8)


def grids(path, panels, suptitle: str, *, vmin=None, vmax=None):
  """Writes side-by-side layers x heads grids to a PNG.

  Args:
    path: the PNG to write.
    panels: (title, [layers, heads] values) per panel.
    suptitle: the figure's title.
    vmin: the colour scale's low end (None: the data's).
    vmax: its high end.
  """
  figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
  for ax, (title, values) in zip(axes[0], panels):
    _grid(ax, values, title, vmin, vmax, figure)
  figure.suptitle(suptitle, fontsize=10)
  # Fixed margins: matplotlib's automatic layouts cost more than drawing the grids.
  figure.subplots_adjust(left=0.16 / len(panels), right=0.98, bottom=0.12, top=0.84, wspace=0.25)
  figure.savefig(path, dpi=100)
  plt.close(figure)


def heatmap(path, word_map_WW, words, title: str):
  """Writes one head's word-level attention with the words on both axes (rows attend)."""
  size = max(4.0, 0.35 * len(words) + 1.5)
  figure, axes = plt.subplots(figsize=(size + 1, size))
  image = axes.imshow(word_map_WW, cmap="Blues", vmin=0.0)
  axes.set_xticks(range(len(words)), words, rotation=90, fontsize=8)
  axes.set_yticks(range(len(words)), words, fontsize=8)
  axes.set_xlabel("attended word")
  axes.set_ylabel("attending word")
  axes.set_title(title, fontsize=9)
  figure.colorbar(image, ax=axes, shrink=0.8)
  figure.savefig(path, dpi=100, bbox_inches="tight")  # Room for words of any length.
  plt.close(figure)
