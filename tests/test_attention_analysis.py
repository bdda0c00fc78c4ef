"""analyze_attention's parts on hand-made sentences and attention maps with known answers."""

import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.tools.attention_analysis import conllu, head_stats, relations, word_maps


def _sentence(heads, relations_, words=None, upos=None):
  words = words or tuple(f"w{i}" for i in range(len(heads)))
  upos = upos or ("_",) * len(heads)
  return conllu.Sentence(tuple(words), tuple(heads), tuple(relations_), tuple(upos), 1)


def test_word_level_sums_attention_to_a_word_and_averages_attention_from_it():
  # [CLS] a b1 b2 c [SEP]: word 1 is split into two tokens; the special tokens are no word.
  words_of_tokens = word_maps.word_of_token([1, 2, 1], 6)
  np.testing.assert_array_equal(words_of_tokens, [-1, 0, 1, 1, 2, -1])
  attention = np.zeros((6, 6))
  attention[1] = [0.1, 0.0, 0.2, 0.3, 0.4, 0.0]  # a: 0.5 to b (0.2 + 0.3), 0.4 to c.
  attention[2] = [0.0, 0.6, 0.0, 0.0, 0.0, 0.4]  # b1: 0.6 to a, the rest to [SEP].
  attention[3] = [0.0, 0.2, 0.0, 0.0, 0.8, 0.0]  # b2: 0.2 to a, 0.8 to c.
  attention[4] = [0.0, 0.0, 0.5, 0.5, 0.0, 0.0]  # c: all to b.
  maps = word_maps.word_level(attention[None, None], words_of_tokens)
  expected = [
    [0.0, 0.5, 0.4],
    [(0.6 + 0.2) / 2, 0.0, (0.0 + 0.8) / 2],  # The mean of b1's and b2's rows.
    [0.0, 1.0, 0.0],
  ]
  np.testing.assert_allclose(maps[0, 0], expected, atol=1e-7)


class _Tokenizer:
  """Splits a word into pieces of at most 3 characters; drops the leading space."""

  def encode_batch(self, texts):
    return [[len(t.strip()[i : i + 3]) for i in range(0, len(t.strip()), 3)] for t in texts]


def test_token_ids_are_tokenised_word_by_word():
  sentence = _sentence([-1, 0, 0], ["root", "obj", "punct"], words=["abcdef", "ab", ""])
  assert word_maps.token_ids([sentence], _Tokenizer()) == [[[3, 3], [2], []]]


def test_most_attended_word_skips_itself_and_takes_the_earlier_of_ties():
  maps = np.array([[0.9, 0.05, 0.05], [0.3, 0.4, 0.3], [0.2, 0.2, 0.6]])
  np.testing.assert_array_equal(relations.most_attended(maps), [1, 0, 0])


def _scores(sentences_and_maps):
  scores = relations.RelationScores(num_layers=1, num_heads=2)
  for sentence, maps in sentences_and_maps:
    scores.add(sentence, np.asarray(maps, np.float32))
  return scores.results()


def test_both_directions_and_the_fixed_offset_baseline():
  # "the cat sat": det(cat -> the), nsubj(sat -> cat). Head 0 looks left, head 1 right.
  sentence = _sentence([1, 2, -1], ["det", "nsubj", "root"])
  left = [[0, 0, 1], [1, 0, 0], [0, 1, 0]]  # Each word's left neighbour (word 0: the last).
  right = [[0, 1, 0], [0, 0, 1], [0.5, 0.5, 0]]  # Each word's right neighbour (word 2: a tie).
  results = _scores([(sentence, [[left, right]])])
  assert list(results) == ["det", "nsubj"]  # Most frequent first, then by name.
  det, nsubj = results["det"], results["nsubj"]
  # det: "the" -> "cat" is one to the right (head 1); "cat" -> "the" one to the left (head 0).
  np.testing.assert_array_equal(det.accuracy[relations.DEP_TO_HEAD], [[0, 1]])
  np.testing.assert_array_equal(det.accuracy[relations.HEAD_TO_DEP], [[1, 0]])
  # nsubj: "cat" -> "sat" right (head 1); "sat" -> "cat": head 0's left, and head 1's tie
  # between "the" and "cat" goes to the earlier word, "the": wrong.
  np.testing.assert_array_equal(nsubj.accuracy[relations.DEP_TO_HEAD], [[0, 1]])
  np.testing.assert_array_equal(nsubj.accuracy[relations.HEAD_TO_DEP], [[1, 0]])
  assert det.baseline[relations.DEP_TO_HEAD] == relations.Baseline(offset=1, accuracy=1.0)
  assert det.baseline[relations.HEAD_TO_DEP] == relations.Baseline(offset=-1, accuracy=1.0)
  assert det.best(relations.HEAD_TO_DEP) == (0, 0)


def test_from_the_head_any_dependent_by_that_relation_is_right():
  # "big red dog": amod(dog -> big), amod(dog -> red): the head names one of two dependents.
  sentence = _sentence([2, 2, -1], ["amod", "amod", "root"])
  to_big = [[0, 0, 1], [0, 0, 1], [1, 0, 0]]
  to_red = [[0, 0, 1], [0, 0, 1], [0, 1, 0]]
  amod = _scores([(sentence, [[to_big, to_red]])])["amod"]
  assert amod.count == 2
  np.testing.assert_array_equal(amod.accuracy[relations.HEAD_TO_DEP], [[1, 1]])
  np.testing.assert_array_equal(amod.accuracy[relations.DEP_TO_HEAD], [[1, 1]])
  # Offsets to the head: +2 and +1, a tie: the nearer one wins and is right once in two.
  assert amod.baseline[relations.DEP_TO_HEAD] == relations.Baseline(offset=1, accuracy=0.5)
  # From the head: -2 and -1 tie, -1 wins, and "red" is a dependent for both dependencies.
  assert amod.baseline[relations.HEAD_TO_DEP] == relations.Baseline(offset=-1, accuracy=1.0)


def test_baseline_takes_the_most_common_offset_over_sentences():
  # obj two to the right of its head twice, one to the right once.
  uniform = np.full((1, 2, 4, 4), 0.25)
  sentences = [
    _sentence([-1, 0, 0, 0], ["root", "x", "obj", "x"]),
    _sentence([-1, 0, 0, 0], ["root", "x", "obj", "x"]),
    _sentence([-1, 0, 0, 0], ["root", "obj", "x", "x"]),
  ]
  obj = _scores([(s, uniform) for s in sentences])["obj"]
  assert obj.baseline[relations.DEP_TO_HEAD] == relations.Baseline(-2, 2 / 3)
  assert obj.baseline[relations.HEAD_TO_DEP] == relations.Baseline(2, 2 / 3)
  # Uniform attention: every word's first other word (word 0, or word 1 from word 0).
  np.testing.assert_allclose(obj.accuracy[relations.DEP_TO_HEAD], [[1, 1]])
  np.testing.assert_allclose(obj.accuracy[relations.HEAD_TO_DEP], [[1 / 3, 1 / 3]])


def test_general_statistics_of_a_head():
  # [CLS] w , [SEP]: the token of "," is punctuation; one head, two examples.
  attention = np.array(
    [
      [1.0, 0.0, 0.0, 0.0],
      [0.5, 0.0, 0.5, 0.0],
      [0.0, 0.5, 0.0, 0.5],
      [0.0, 0.0, 0.0, 1.0],
    ]
  )
  stats = head_stats.HeadStatistics(num_layers=1, num_heads=1)
  separator = np.array([False, False, False, True])
  punctuation = np.array([False, False, True, False])
  for _ in range(2):
    stats.add(attention[None, None], separator, punctuation)
  means = stats.means()
  assert means["first_special"][0, 0] == pytest.approx(1.5 / 4)
  assert means["separator"][0, 0] == pytest.approx(1.5 / 4)
  assert means["punctuation"][0, 0] == pytest.approx(0.5 / 4)
  # w -> [CLS] and "," -> w; of the 3 tokens that have a previous one ([CLS] has none).
  assert means["previous"][0, 0] == pytest.approx(1.0 / 3)
  assert means["next"][0, 0] == pytest.approx(1.0 / 3)  # w -> "," and "," -> [SEP].
  assert means["entropy"][0, 0] == pytest.approx(2 * np.log(2) / 4)


def test_punctuation_by_tag_or_by_characters():
  assert head_stats.is_punctuation(",", "PUNCT")
  assert not head_stats.is_punctuation("--", "SYM")
  assert head_stats.is_punctuation("?!", "_")
  assert not head_stats.is_punctuation("a.", "_")


def test_conllu_skips_multiword_tokens_and_empty_nodes(tmp_path):
  sentences = conllu.read("tests/attention_sample.conllu")
  assert len(sentences) == 12
  assert sentences[4].words == ("We", "do", "n't", "like", "cold", "rain", ".")
  assert sentences[4].heads == (3, 3, 3, -1, 5, 3, 3)
  assert sentences[11].words[-3:] == ("Mary", "oranges", ".")
  assert sentences[2].relations[0] == "nmod:poss"


@pytest.mark.parametrize(
  "text,expected",
  [
    ("1\tThe\tthe\tDET\t_\t_\t_\t_\t_\t_\n", "the word 'The' has no HEAD / DEPREL"),
    ("1\tThe\tthe\tDET\n", "4 tab-separated columns and so no HEAD / DEPREL"),
    ("1\tThe\tthe\tDET\t_\t_\t7\tdet\t_\t_\n", "HEAD 7 is past the sentence's 1 words"),
    ("# only a comment\n", "holds no sentence"),
  ],
)
def test_conllu_bad_input_is_one_line(tmp_path, text, expected):
  path = tmp_path / "bad.conllu"
  path.write_text(text)
  with pytest.raises(UserInputError, match=expected):
    conllu.read(path)
