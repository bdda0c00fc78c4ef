"""README.md is a front page, docs/ holds the depth, and the product speaks of itself only."""

import pathlib
import re
import subprocess

import pytest

from bert_jax.tools import config_keys

REPO = pathlib.Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")

# The pages README links into; each exists and is linked.
DOC_PAGES = (
  "architecture",
  "configs",
  "data",
  "families",
  "fine-tuning",
  "operations",
  "attention",
  "attention_analysis",
  "tpu",
  "gpu",
  "benchmarks",
)

# Words that describe how the project was worked on rather than what it is. Built from parts
# so that this file does not match itself.
_PROCESS_WORDS = re.compile(
  "|".join(
    (
      r"\bstops? \d+\b",
      r"\bissue \d+\b",
      r"\blent " + "device",
      r"\bdevice " + "session",
      r"\b(this|last|next) " + "round\b",
      r"\bslow " + "day\b",
      r"\bquiet " + "machine\b",
    )
  ),
  re.IGNORECASE,
)


def test_readme_opens_with_the_two_commands_and_stays_a_front_page():
  assert len(README) <= 16_000
  blocks = re.findall(r"^    (python3 -m venv .*)$", README, flags=re.MULTILINE)[:2]
  assert len(blocks) == 2
  assert blocks[0].endswith("bert-jax train --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny")
  assert "pytest -q -n 2 --dist loadfile tests" in blocks[1]
  head = README.split("\n## ", 1)[0]
  assert head.index(blocks[0]) < head.index(blocks[1])
  sections = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
  for wanted in (
    "Status",
    "Contents",
    "Quick start: a laptop CPU",
    "Quick start: your own text",
    "Quick start: a GPU box",
    "Quick start: a TPU slice",
    "Quick start: a Hugging Face checkpoint, end to end",
    "Commands",
    "Results",
    "Documentation",
  ):
    assert wanted in sections


def test_every_contents_entry_and_doc_link_resolves():
  anchors = {
    re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
    for title in re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
  }
  for anchor in re.findall(r"\]\(#([^)]+)\)", README):
    assert anchor in anchors, anchor
  for page in DOC_PAGES:
    assert (REPO / "docs" / f"{page}.md").is_file(), page
    assert f"(docs/{page}.md)" in README, page
  for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
      assert (doc.parent / target).exists(), f"{doc.name} links to a missing {target}"


def test_results_rows_carry_hardware_date_and_command():
  results = README.split("\n## Results", 1)[1].split("\n## ", 1)[0]
  rows = [line for line in results.splitlines() if line.startswith("| ") and "---" not in line]
  assert rows[0].startswith("| what | result | hardware | date | command |")
  for row in rows[1:]:
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert len(cells) == 5, row
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}|every CI run", cells[3]), row
    assert cells[4], row


def test_the_configs_page_is_generated_from_the_declared_keys():
  page = (REPO / "docs" / "configs.md").read_text(encoding="utf-8")
  assert page == config_keys.markdown_page(str(REPO / "configs")), (
    "docs/configs.md is stale: run `bert-jax config-keys --format=markdown > docs/configs.md`"
  )


def test_no_words_of_the_development_process_in_the_product():
  tracked = subprocess.run(
    ["git", "ls-files", "README.md", "docs", "bert_jax", "configs", "launch", "tests", "setup.py"],
    cwd=REPO,
    capture_output=True,
    text=True,
    check=False,
  )
  if tracked.returncode:
    pytest.fail(f"git ls-files failed: {tracked.stderr}")
  hits = []
  for name in tracked.stdout.split():
    path = REPO / name
    if path.suffix in (".py", ".md", ".sh", ".yaml", ".yml", ".cfg") and path.is_file():
      for number, line in enumerate(
        path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
      ):
        if _PROCESS_WORDS.search(line):
          hits.append(f"{name}:{number}: {line.strip()[:120]}")
  assert not hits, "\n".join(hits)


def test_the_license_is_apache_2_and_declared():
  assert "Apache License" in (REPO / "LICENSE").read_text(encoding="utf-8")
  assert 'license="Apache-2.0"' in (REPO / "setup.py").read_text(encoding="utf-8")
