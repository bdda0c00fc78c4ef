"""Segment-level recurrence: consecutive segments per row (resumable, per host), and memory
that resets at document boundaries. The held-out-loss-vs-memory measurement is
`bert_jax.bench.memory_length` (too slow for the suite)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.bench import memory_length
from bert_jax.data.segment_stream import SegmentStream
from bert_jax.data.tokenized_corpus import TokenizedDocuments
from bert_jax.errors import UserInputError
from bert_jax.models.recurrence_options import with_recurrence
from bert_jax.models.xlnet.model import XLNetLMHeadModel

# The memory-length experiment's byte LM, as an XLNet.
LM = dataclasses.replace(memory_length.BYTE_LM, family="xlnet")


def test_rows_get_consecutive_segments_per_host_and_resume_anywhere():
  corpus = TokenizedDocuments.from_id_lists(
    [[np.arange(100, 100 + n)] for n in (37, 20, 51)]  # Three one-sentence documents.
  )
  stream = SegmentStream.from_documents(corpus, global_rows=4, segment_len=5)
  assert stream.row_len == 27 and stream.segments_per_epoch == 5
  steps = [stream.batch(t) for t in range(stream.segments_per_epoch + 1)]
  row_0 = np.concatenate([b["input_ids"][0] for b in steps[:5]])
  np.testing.assert_array_equal(row_0, corpus.token_ids[:25])
  for t in range(5):
    np.testing.assert_array_equal(steps[t]["labels"][:, :-1], steps[t]["input_ids"][:, 1:])
  # Row 1 starts at token 27 (document 1's tokens 27..36, then document 2): the label that
  # crosses into document 2 has weight 0.
  batch = steps[1]
  np.testing.assert_array_equal(batch["document_ids"][1], [1, 1, 1, 1, 1])
  np.testing.assert_array_equal(batch["label_weights"][1], [1, 1, 1, 1, 0])
  # The epoch wraps around; each of two processes gets its half of the rows, bit for bit.
  np.testing.assert_array_equal(steps[5]["input_ids"], steps[0]["input_ids"])
  # ... under new document ids, so no row takes the end of its stream as memory of its start.
  assert not set(steps[5]["document_ids"].ravel()) & set(steps[4]["document_ids"].ravel())
  np.testing.assert_array_equal(steps[5]["document_ids"], steps[0]["document_ids"] + 3)
  halves = [stream.batch(3, p, 2) for p in range(2)]
  np.testing.assert_array_equal(
    np.concatenate([h["input_ids"] for h in halves]), stream.batch(3)["input_ids"]
  )
  with pytest.raises(UserInputError, match="do not give 64 rows one 5-token segment"):
    SegmentStream.from_documents(corpus, global_rows=64, segment_len=5)


def test_memory_of_another_document_is_not_seen():
  params = XLNetLMHeadModel(with_recurrence(LM, mem_len=4)).init(
    jax.random.key(0),
    jnp.ones((1, 4), jnp.int32),
    jnp.zeros((1, 4), jnp.int32),
    jnp.ones((1, 4), jnp.int32),
  )["params"]
  model = XLNetLMHeadModel(with_recurrence(LM, mem_len=4))
  ids_BL = jnp.array([[5, 6, 7, 8]])
  types_BL = jnp.zeros_like(ids_BL)
  memory = [jax.random.normal(jax.random.key(i), (1, 4, 64)) for i in range(2)]
  run = lambda docs, mem_docs: model.apply(
    {"params": params}, ids_BL, types_BL, docs, memory, memory_ids_BN=mem_docs
  )["logits"]
  alone = model.apply({"params": params}, ids_BL, types_BL, jnp.full((1, 4), 2))["logits"]
  # Tokens of document 2 ignore memory of document 1 entirely; document 1's tokens use it.
  np.testing.assert_allclose(run(jnp.full((1, 4), 2), jnp.full((1, 4), 1)), alone, atol=1e-6)
  assert float(jnp.max(jnp.abs(run(jnp.full((1, 4), 1), jnp.full((1, 4), 1)) - alone))) > 1e-3
