"""SQuAD EM / F1 equal the reference (`transformers.data.metrics.squad_metrics`) on fixed cases."""

import types

import pytest

from bert_jax.tasks.span_qa import metrics as squad_metrics

# (gold answers, prediction): punctuation, articles, unicode, empty answers, several golds.
CASES = {
  "same": (["Denver Broncos"], "denver broncos"),
  "article_punct": (["the Broncos"], "Broncos!"),
  "articles_only_as_words": (["An apple a day"], "apple day"),
  "article_inside_word": (["theatre"], "atre"),
  "hyphen": (["Saint-Étienne", "Saint Étienne"], "saint étienne"),
  "accents_kept": (["Gödel's theorem"], "Godel's theorem"),
  "best_of_golds": (["1,000 years", "a thousand years"], "thousand years ago"),
  "no_answer_right": ([], ""),
  "no_answer_wrong": ([], "something"),
  "empty_prediction": (["blue"], ""),
  "gold_only_article": (["the"], ""),
  "gold_only_article_wrong": (["The", "An"], "dog"),
  "overlap": (["the cat", "cat sat"], "the cat sat on"),
  "whitespace": (["  spaced\tout \n"], "spaced out"),
  "unicode_punct": (["naïve — “quoted”"], "naïve quoted"),
  "unicode_case": (["Théâtre ΣΟΦΙΑ"], "THÉÂTRE σοφια"),
  "multiset": (["a b c b"], "b b d b"),
  "no_overlap": (["Paris"], "London"),
}


@pytest.fixture(scope="module")
def reference():
  from transformers.data.metrics import squad_metrics as hf  # pylint: disable=g-import-not-at-top

  return hf


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_and_f1_equal_the_reference_pair_by_pair(reference, case):
  golds, prediction = CASES[case]
  for gold in golds or [""]:
    assert squad_metrics.exact_match(prediction, gold) == reference.compute_exact(gold, prediction)
    assert squad_metrics.f1_score(prediction, gold) == pytest.approx(
      reference.compute_f1(gold, prediction), abs=1e-12
    )


def _reference_scores(reference, cases):
  examples = [
    types.SimpleNamespace(qas_id=qid, answers=[{"text": g} for g in golds])
    for qid, (golds, _) in cases.items()
  ]
  return dict(reference.squad_evaluate(examples, {qid: p for qid, (_, p) in cases.items()}))


def test_scores_over_a_set_equal_the_reference_with_the_has_ans_no_ans_breakdown(reference):
  ours = squad_metrics.squad_scores(
    {q: g for q, (g, _) in CASES.items()}, {q: p for q, (_, p) in CASES.items()}
  )
  expected = _reference_scores(reference, CASES)
  assert set(ours) == {"exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"}
  assert expected["HasAns_total"] == 16 and expected["NoAns_total"] == 2
  for key, value in ours.items():
    assert value == pytest.approx(expected[key], abs=1e-9), key
  # Fixed numbers, so a change in the reference shows too.
  assert ours["NoAns_exact"] == 50.0 and ours["exact"] == pytest.approx(100 * 8 / 18)
  # "a" is an article: 2 common words of 4 predicted and 3 gold.
  assert squad_metrics.f1_score("b b d b", "a b c b") == pytest.approx(4 / 7)


def test_answerable_questions_only_give_exact_and_f1_as_squad_1_1():
  cases = {q: c for q, c in CASES.items() if c[0]}
  scores = squad_metrics.squad_scores(
    {q: g for q, (g, _) in cases.items()}, {q: p for q, (_, p) in cases.items()}
  )
  assert set(scores) == {"exact", "f1"}
  assert scores["exact"] == pytest.approx(100 * 7 / 16)
  with pytest.raises(ValueError, match="1 questions have no prediction"):
    squad_metrics.squad_scores({"a": ["x"]}, {})
