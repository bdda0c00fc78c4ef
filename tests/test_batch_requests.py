"""The request checks every pipeline's ``batches()`` shares (`data/batch_requests.py`)."""

import pytest

from bert_jax.data.batch_requests import check_batch_request
from bert_jax.errors import UserInputError

_SPLITS = ("train", "eval")


@pytest.mark.parametrize(
  "request_args,whole_batches,message",
  [
    (("test", 8, 0, 1, 0), False, "split is 'test'; use one of"),
    (("train", 6, 0, 4, 0), False, "global_batch_size 6 is not a positive multiple of"),
    (("train", 8, 2, 2, 0), True, r"process_index 2 is not in \[0, 2\)"),
    (("train", 8, 0, 1, -8), False, "start_position is -8; it counts examples, so >= 0"),
    (("train", 8, 0, 1, 12), True, "start_position is 12; it counts rows of whole global"),
    (("train", 8, 0, 1, -8), True, "start_position is -8; it counts rows of whole global"),
  ],
)
def test_a_request_no_pipeline_can_serve_is_one_line(request_args, whole_batches, message):
  split, batch, index, count, start = request_args
  with pytest.raises(UserInputError, match=message):
    check_batch_request(split, _SPLITS, batch, index, count, start, whole_batches=whole_batches)


def test_a_servable_request_passes():
  check_batch_request("eval", _SPLITS, 8, 1, 2, 12)  # Examples: any position.
  check_batch_request("train", _SPLITS, 8, 1, 2, 16, whole_batches=True)
