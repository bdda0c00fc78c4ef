"""Sentence splitting for plain prose: one sentence per line is BERT's pretraining text format."""

import re

# Candidate sentence boundary: end punctuation (plus closing quotes) then space then a capital,
# digit or opening quote/bracket.
_BOUNDARY = re.compile(r"([.!?][\"'”’)\]]*)\s+(?=[\"'“‘(\[]?[A-Z0-9])")
# Words whose trailing period is part of an abbreviation, not the end of a sentence.
_ABBREVIATIONS = frozenset(
  [
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "st",
    "jr",
    "sr",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "cf",
    "ca",
    "c",
    "no",
    "nos",
    "vol",
    "vols",
    "pp",
    "p",
    "fig",
    "gen",
    "col",
    "lt",
    "capt",
    "gov",
    "sen",
    "rep",
    "rev",
    "inc",
    "ltd",
    "co",
    "corp",
    "mt",
    "ft",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "approx",
    "est",
    "al",
    "op",
  ]
)


def split_sentences(paragraph):
  """Splits a paragraph at sentence ends, keeping abbreviations and initials together."""
  sentences = []
  start = 0
  for match in _BOUNDARY.finditer(paragraph):
    last_word = paragraph[start : match.start() + 1].split()[-1].rstrip(".").lower()
    # "J. S. Bach", "U.S. Army", "e.g. this": a single letter or a dotted or listed abbreviation.
    if len(last_word) == 1 or "." in last_word or last_word in _ABBREVIATIONS:
      continue
    sentences.append(paragraph[start : match.end(1)].strip())
    start = match.end()
  sentences.append(paragraph[start:].strip())
  return [s for s in sentences if s]
