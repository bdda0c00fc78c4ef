"""Rebuilds the embedded default corpus from the English Wikipedia sample in the gensim wheel.

The gensim 4.4.0 wheel ships a shortened dump of English Wikipedia
(``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``,
206 pages). This tool turns it into ``bert_jax/data/corpus/``:

* ``enwiki_sample.txt``: plain prose in the original BERT format (one sentence per line, a blank
  line between documents); markup, tables, references, lists, headings and captions are dropped.
* ``vocab.txt``: an uncased BERT WordPiece vocab trained on that text with ``tokenizers``.
* ``ATTRIBUTION.md``: source, licence, article titles and the command that regenerates the files.

Run (gensim is needed by this tool only)::

  pip install gensim==4.4.0
  python -m bert_jax.tools.build_default_corpus

Every step is deterministic, so running it twice gives byte-identical files.
"""

import bz2
import importlib.resources
import os
import re
import unicodedata

from absl import flags, logging

from bert_jax.cli import runner
from bert_jax.data import sentences, wordpiece_training
from bert_jax.errors import UserInputError

_GENSIM_VERSION = "4.4.0"
_SAMPLE_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_REGENERATE_COMMAND = (
  f"pip install gensim=={_GENSIM_VERSION} && python -m bert_jax.tools.build_default_corpus"
)

# Sections after these headings are bibliographies, link lists or notes, never running prose.
_TRAILING_SECTIONS = re.compile(
  r"^=+\s*(see also|references|notes|footnotes|citations|sources|bibliography|"
  r"further reading|external links|works cited|primary sources|secondary sources)\s*=+\s*$",
  re.IGNORECASE | re.MULTILINE,
)
_NON_ARTICLE_TITLE = re.compile(
  r"^(wikipedia|template|help|category|portal|file|draft|module|user)( talk)?:", re.IGNORECASE
)
# A paragraph counts as prose only if it ends like a sentence; captions and table cells do not.
_ENDS_LIKE_SENTENCE = re.compile(r"[.!?][\"'”’)\]]*$")
_EMPTY_PARENS = re.compile(r"\(\s*[,;:–—-]*\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])(?=\s|$)")
_LEADING_PUNCT_IN_PARENS = re.compile(r"\(\s*[,;:]\s*")
_SPACES = re.compile(r"\s+")


def _import_gensim_wikicorpus():
  """Imports gensim's Wikipedia reader lazily: nothing else in bert_jax needs gensim."""
  try:
    from gensim.corpora import wikicorpus  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
      f"build_default_corpus needs gensim; run: pip install gensim=={_GENSIM_VERSION}"
    ) from e
  return wikicorpus


def _gensim_sample_path():
  """Returns the path of the Wikipedia sample bundled in the installed gensim wheel."""
  _import_gensim_wikicorpus()
  path = importlib.resources.files("gensim") / "test" / "test_data" / _SAMPLE_NAME
  if not path.is_file():
    raise FileNotFoundError(
      f"{_SAMPLE_NAME} is not inside the installed gensim; run: "
      f"pip install --force-reinstall gensim=={_GENSIM_VERSION}, or pass --source=<dump.bz2>"
    )
  return str(path)


def _remove_balanced(text, opener, open_char, close_char):
  """Removes every block that starts with ``opener`` up to its matching close, nesting aware.

  Regexes cannot match nested ``[[File:..[[link]]..]]`` or ``{| .. {| .. |} .. |}``, and leaving
  half a block behind leaks captions and table cells into the prose.
  """
  pieces = []
  position = 0
  lowered = text.lower()
  opener = opener.lower()
  while True:
    start = lowered.find(opener, position)
    if start < 0:
      pieces.append(text[position:])
      return "".join(pieces)
    pieces.append(text[position:start])
    depth = 0
    index = start
    while index < len(text):
      if text[index] == open_char:
        depth += 1
      elif text[index] == close_char:
        depth -= 1
        if depth == 0:
          break
      index += 1
    position = index + 1


def strip_wikitext(wikitext, filter_wiki):
  """Returns the article body as plain text lines, before sentence splitting.

  Args:
    wikitext: raw MediaWiki markup of one article.
    filter_wiki: gensim's ``wikicorpus.filter_wiki`` (removes templates, references, tags, links).

  Returns:
    The text with the trailing reference sections, tables, galleries and file links removed.
  """
  cut = _TRAILING_SECTIONS.search(wikitext)
  if cut:
    wikitext = wikitext[: cut.start()]
  wikitext = re.sub(r"<gallery.*?</gallery>", "", wikitext, flags=re.DOTALL | re.IGNORECASE)
  wikitext = re.sub(r"<ref[^>]*/>|<ref.*?</ref>", "", wikitext, flags=re.DOTALL | re.IGNORECASE)
  for opener in ("[[File:", "[[Image:"):
    wikitext = _remove_balanced(wikitext, opener, "[", "]")
  wikitext = _remove_balanced(wikitext, "{|", "{", "}")
  return filter_wiki(wikitext)


def _clean_paragraph(line):
  """Drops emphasis quotes and the debris that removed templates leave behind."""
  line = unicodedata.normalize("NFC", line).replace("\xa0", " ")
  line = re.sub(r"'{2,}", "", line)
  line = _LEADING_PUNCT_IN_PARENS.sub("(", line)
  line = _EMPTY_PARENS.sub("", line)
  line = _SPACES.sub(" ", line)
  line = _SPACE_BEFORE_PUNCT.sub(r"\1", line)
  return line.strip()


def prose_paragraphs(plain_text):
  """Returns the paragraphs of running prose: no headings, lists, table cells or captions."""
  paragraphs = []
  for line in plain_text.split("\n"):
    line = line.strip()
    # Headings, list items, definition lists, indents and table debris start with markup.
    if not line or line[0] in "=*#:;|!{}+-^\\,.":
      continue
    line = _clean_paragraph(line)
    if "|" in line or "__" in line or not _ENDS_LIKE_SENTENCE.search(line):
      continue
    paragraphs.append(line)
  return paragraphs


def article_sentences(wikitext, filter_wiki, min_sentence_words):
  """Returns the prose sentences of one article, in order."""
  kept = []
  for paragraph in prose_paragraphs(strip_wikitext(wikitext, filter_wiki)):
    kept.extend(
      s for s in sentences.split_sentences(paragraph) if len(s.split()) >= min_sentence_words
    )
  return kept


def read_articles(dump_path, wikicorpus):
  """Yields ``(title, wikitext)`` of real articles: no redirects, disambiguations or meta pages."""
  with bz2.open(dump_path, "rb") as stream:
    for title, wikitext, _ in wikicorpus.extract_pages(stream):
      if _NON_ARTICLE_TITLE.match(title) or "(disambiguation)" in title:
        continue
      if wikitext.lstrip().lower().startswith("#redirect"):
        continue
      yield title, wikitext


def _attribution_markdown(
  titles, num_sentences, num_bytes, vocab_size, min_sentence_words, min_document_sentences
):
  """Text of ATTRIBUTION.md: source, licence, method and the regeneration command."""
  title_lines = "\n".join(f"- {t}" for t in titles)
  return f"""# Default corpus: attribution and provenance

`enwiki_sample.txt` is text from **English Wikipedia** (<https://en.wikipedia.org>), written by
Wikipedia contributors and licensed under the
[Creative Commons Attribution-ShareAlike 3.0](https://creativecommons.org/licenses/by-sa/3.0/) /
[4.0](https://creativecommons.org/licenses/by-sa/4.0/) licences (CC BY-SA). Each article's
authors are listed in its page history on Wikipedia. The text here is an adapted version:
markup, tables, lists, captions, headings and reference sections were removed and the prose was
split into sentences. It is redistributed under the same licence (CC BY-SA).

`vocab.txt` is derived from that text (an uncased WordPiece vocab of {vocab_size} entries).

## How it was made

- Source: `gensim/test/test_data/{_SAMPLE_NAME}`, the shortened Wikipedia dump bundled in the
  `gensim=={_GENSIM_VERSION}` wheel (206 pages).
- Redirects, disambiguation and meta pages were skipped; in each article everything from the
  first "See also" / "References" / "Notes" / "External links"-style heading on was dropped;
  tables, galleries, file links and references were removed, then gensim's `filter_wiki`
  stripped the remaining markup.
- Only paragraphs of running prose were kept (no headings, lists, table cells or captions),
  split into sentences; sentences under {min_sentence_words} words and articles under
  {min_document_sentences} sentences were dropped.
- Format: one sentence per line, a blank line between articles ({len(titles)} articles,
  {num_sentences} sentences, {num_bytes} bytes).
- `vocab.txt`: `tokenizers` WordPiece trainer (BERT normaliser, lowercase, accents stripped;
  BERT pre-tokeniser; min frequency 2; special tokens `[PAD]`=0, `[UNK]`, `[CLS]`, `[SEP]`,
  `[MASK]`).

## Regenerate

```
{_REGENERATE_COMMAND}
```

## Articles

{title_lines}
"""


def build_corpus(source, output_dir, vocab_size, min_sentence_words, min_document_sentences):
  """Writes enwiki_sample.txt, vocab.txt and ATTRIBUTION.md into ``output_dir``.

  Returns:
    The titles of the articles that made it into the corpus.
  """
  wikicorpus = _import_gensim_wikicorpus()
  titles = []
  documents = []
  for title, wikitext in read_articles(source, wikicorpus):
    article = article_sentences(wikitext, wikicorpus.filter_wiki, min_sentence_words)
    if len(article) >= min_document_sentences:
      titles.append(title)
      documents.append(article)
  os.makedirs(output_dir, exist_ok=True)
  text_path = os.path.join(output_dir, "enwiki_sample.txt")
  text = "\n\n".join("\n".join(doc) for doc in documents) + "\n"
  with open(text_path, "w", encoding="utf-8", newline="\n") as f:
    f.write(text)
  tokens = wordpiece_training.train_wordpiece_vocab(text_path, vocab_size)
  with open(os.path.join(output_dir, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
    f.write("".join(t + "\n" for t in tokens))
  num_sentences = sum(len(d) for d in documents)
  with open(os.path.join(output_dir, "ATTRIBUTION.md"), "w", encoding="utf-8") as f:
    f.write(
      _attribution_markdown(
        titles,
        num_sentences,
        len(text.encode("utf-8")),
        len(tokens),
        min_sentence_words,
        min_document_sentences,
      )
    )
  logging.info(
    "wrote %d articles, %d sentences, %d vocab entries to %s",
    len(titles),
    num_sentences,
    len(tokens),
    output_dir,
  )
  return titles


def _define_flags(values: flags.FlagValues):
  define = {"flag_values": values}
  flags.DEFINE_string(
    "source", "", "Wikipedia .xml.bz2 dump; empty: the sample inside gensim.", **define
  )
  flags.DEFINE_string(
    "output_dir", "", "Where to write the files; empty: the bert_jax/data/corpus dir.", **define
  )
  flags.DEFINE_integer("vocab_size", 8192, "Entries in the WordPiece vocab.", **define)
  flags.DEFINE_integer(
    "min_sentence_words", 4, "Sentences with fewer words are dropped as fragments.", **define
  )
  flags.DEFINE_integer(
    "min_document_sentences", 3, "Articles with fewer prose sentences are dropped.", **define
  )


def _build(values: flags.FlagValues):
  # A missing dump is named before gensim is imported, so the message does not depend on it.
  if values.source and not os.path.isfile(values.source):
    raise UserInputError(
      f"--source={values.source} does not exist; pass a Wikipedia .xml.bz2 dump, or leave it "
      "out for the sample inside gensim"
    )
  source = values.source or _gensim_sample_path()
  output_dir = values.output_dir or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus"
  )
  build_corpus(
    source,
    output_dir,
    values.vocab_size,
    values.min_sentence_words,
    values.min_document_sentences,
  )


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  logging.set_verbosity(logging.INFO)
  return runner.run(__doc__, _define_flags, _build, argv)


if __name__ == "__main__":
  raise SystemExit(main())
