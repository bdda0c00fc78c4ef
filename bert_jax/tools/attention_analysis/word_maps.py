"""Word-level attention from token-level attention (Clark et al., 2019, section 4.1).

A word split into several tokens receives the sum of the attention to its tokens and gives
the mean of its tokens' attention rows, so each word row still sums to the attention its
tokens gave to words. Special tokens ([CLS], [SEP], <s>, </s>) belong to no word and take no
part: their columns are dropped, so a word row sums to 1 minus what went to them.
"""

import numpy as np


def token_ids(sentences, tokenizer):
  """Each sentence's token ids word by word, without special tokens.

  Words are tokenised one at a time; all but the first get a leading space, which WordPiece
  drops and byte-level BPE / SentencePiece read as a word start, so the ids are those of the
  words joined by spaces.

  Args:
    sentences: `conllu.Sentence`s.
    tokenizer: a tokenizer of `bert_jax.data.tokenization`.

  Returns:
    One list per sentence of each word's list of ids (a list may be empty: a word the
    tokenizer drops, such as a lone control character).
  """
  texts = [
    word if i == 0 else " " + word
    for sentence in sentences
    for i, word in enumerate(sentence.words)
  ]
  ids = iter(tokenizer.encode_batch(texts))
  return [[next(ids) for _ in sentence.words] for sentence in sentences]


def word_of_token(word_token_counts, length: int) -> np.ndarray:
  """[length] int32: the word of each token of ``[CLS] words [SEP]``, -1 for special tokens.

  Args:
    word_token_counts: the number of tokens of each word, in order (each at least 1).
    length: the example's tokens, special ones included.
  """
  words = np.full(length, -1, np.int32)
  words[1 : 1 + sum(word_token_counts)] = np.repeat(
    np.arange(len(word_token_counts)), word_token_counts
  )
  return words


def word_level(attention_XQK, words_of_tokens) -> np.ndarray:
  """Word-to-word attention of token-to-token attention (any leading axes X).

  Args:
    attention_XQK: [..., T, T] float attention of one example, row q over keys k.
    words_of_tokens: [T] the word of each token, -1 for special tokens (`word_of_token`).

  Returns:
    [..., W, W] float32: row i = mean over word i's tokens of the attention they pay to word
    j's tokens, summed over those.
  """
  count = int(words_of_tokens.max()) + 1
  member_WT = (words_of_tokens[None, :] == np.arange(count)[:, None]).astype(np.float32)
  mean_WT = member_WT / member_WT.sum(axis=1, keepdims=True)
  return np.einsum("wq,...qk,vk->...wv", mean_WT, attention_XQK.astype(np.float32), member_WT)
