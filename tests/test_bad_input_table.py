"""Bad input to every entry point, as a table: each case exits with status 2 and prints exactly
one ``error:`` line (the last on stderr, under 300 characters) that names the problem, no
traceback, and leaves an existing run's checkpoints byte-identical. Everything runs in-process
(`main.run` and each tool's `main`); a tool whose flags bypass the boundary in cli/runner.py
(a usage block and `SystemExit`) fails here."""

import hashlib
import pathlib
import shutil
import sys

import pytest

from bert_jax import main
from bert_jax.bench import (
  benchmark,
  benchmark_attention,
  benchmark_create_pretraining_data,
  benchmark_data,
  benchmark_gpu_attention,
  benchmark_gpu_layer_norm,
  memory_length,
)
from bert_jax.cli import runner
from bert_jax.data import default_corpus
from bert_jax.tools import (
  analyze_attention,
  aot_compile,
  build_default_corpus,
  config_keys,
  convert,
  create_pretraining_data,
  embed,
  export_task,
  synthetic_pairs,
  train_vocab,
)
from tests import finetune_fixtures, run_helpers

TINY = f"--config={run_helpers.REPO}/configs/bert_tiny.py"
XL_TINY = f"--config={run_helpers.REPO}/configs/transformer_xl_tiny.py"
XLNET_TINY = f"--config={run_helpers.REPO}/configs/xlnet_tiny.py"
# Keep jax's process-wide compilation cache settings alone (main would point them at a workdir).
NO_CACHE = "--config.compilation_cache_dir="
VOCAB = f"--vocab={default_corpus.default_vocab_path()}"


def _digest(directory):
  return {
    str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(directory.rglob("*"))
    if p.is_file()
  }


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_pretrained_workdir):
  """Input files for the cases, and a copy of a finished run whose checkpoints must not change."""
  root = tmp_path_factory.mktemp("bad_input")
  run = root / "run"
  shutil.copytree(tiny_pretrained_workdir, run, ignore=shutil.ignore_patterns("run.lock"))
  text = root / "text.txt"
  text.write_text(
    "".join(
      f"Sentence {i} of document {d} is here.\n" + ("\n" if i == 4 else "")
      for d in range(6)
      for i in range(5)
    ),
    encoding="utf-8",
  )
  binary = root / "binary.bin"
  binary.write_bytes(bytes(range(128, 256)) * 40 + b"\n" + bytes(range(128, 256)) * 40)
  # Mostly binary with a few decodable lines: three "documents" of text among 20 bad lines.
  mostly_binary = root / "mostly_binary.bin"
  mostly_binary.write_bytes(
    b"Sentence one.\n\nSentence two.\n\nSentence three.\n" + b"\xff\xfe\n" * 20
  )
  one_sentence = root / "one.txt"
  one_sentence.write_text("Only one sentence here.\n", encoding="utf-8")
  a_file = root / "a_file"
  a_file.write_text("x", encoding="utf-8")
  corrupt = root / "corrupt.tfrecord"
  corrupt.write_bytes(b"\x00\x01garbage" * 100)
  bad_syntax = root / "syntax.py"
  bad_syntax.write_text("def get_config(:\n", encoding="utf-8")
  raising = root / "raising.py"
  raising.write_text("def get_config():\n  raise RuntimeError('boom')\n", encoding="utf-8")
  raising_value = root / "raising_value.py"
  raising_value.write_text("def get_config():\n  return int('x')\n", encoding="utf-8")
  no_function = root / "no_function.py"
  no_function.write_text("config = None\n", encoding="utf-8")
  return dict(
    root=root,
    run=run,
    text=text,
    binary=binary,
    mostly_binary=mostly_binary,
    one_sentence=one_sentence,
    a_file=a_file,
    corrupt=corrupt,
    syntax=bad_syntax,
    raising=raising,
    raising_value=raising_value,
    no_function=no_function,
    directory=root,
    missing=root / "missing.txt",
    fresh=lambda name: root / "workdirs" / name,
  )


def _tool(entry):
  return lambda argv: entry(argv)


def _with_name(entry):
  return lambda argv: entry(["tool", *argv])


MAIN, ABSL = "main", "absl"

# (id, entry, argv as a function of `paths`, text the last line must contain). `MAIN` cases
# run `bert_jax.main` with --config=configs/bert_tiny.py and a fresh workdir unless they pass
# their own.
CASES = [
  # The config file and its flags.
  ("misspelt_key", MAIN, lambda p: [TINY, "--config.model.hiden_size=3"], "no key 'hiden_size'"),
  ("misspelt_top_key", MAIN, lambda p: [TINY, "--config.num_train_step=3"], "no key"),
  ("config_missing", MAIN, lambda p: [f"--config={p['missing']}"], "missing.txt could not be loaded"),
  ("config_syntax", MAIN, lambda p: [f"--config={p['syntax']}"], "syntax error at line 1"),
  ("config_raises", MAIN, lambda p: [f"--config={p['raising']}"], "raising.py raised RuntimeError at line 2: boom"),
  # ml_collections re-raises a ValueError from get_config with the whole traceback as its text.
  ("config_raises_value_error", MAIN, lambda p: [f"--config={p['raising_value']}"], "raising_value.py raised ValueError at line 2: invalid literal for int() with base 10: 'x'"),
  ("config_no_function", MAIN, lambda p: [f"--config={p['no_function']}"], "get_config"),
  ("not_a_number", MAIN, lambda p: [TINY, "--config.optimizer.learning_rate=abc"], "abc"),
  ("unknown_flag", MAIN, lambda p: [TINY, "--wrokdir=/tmp/x"], "wrokdir"),
  ("no_workdir", MAIN, lambda p: [TINY, "--no-workdir"], "--workdir"),
  # Joining a multi-process run (parallel/cluster.py).
  ("cluster_flags_partial", MAIN, lambda p: [TINY, "--num_processes=2", "--process_id=0"], "pass all of --coordinator_address=HOST:PORT"),
  ("cluster_timeout_zero", MAIN, lambda p: [TINY, "--cluster_timeout_s=0"], "--cluster_timeout_s=0 must be positive"),
  # Values out of range (the run's checkpoints must survive them).
  ("negative_lr", MAIN, lambda p: [TINY, "--config.optimizer.learning_rate=-1e-3"], "learning_rate=-0.001 must be > 0"),
  ("zero_lr", MAIN, lambda p: [TINY, "--config.optimizer.learning_rate=0.0"], "learning_rate=0.0 must be > 0"),
  ("negative_warmup", MAIN, lambda p: [TINY, "--config.optimizer.warmup_steps=-5"], "warmup_steps=-5"),
  ("beta_one", MAIN, lambda p: [TINY, "--config.optimizer.b2=1.0"], "optimizer.b2=1.0 must be in [0, 1)"),
  ("mask_prob", MAIN, lambda p: [TINY, "--config.data.mask_prob=1.5"], "data.mask_prob is 1.5"),
  ("mask_token_prob", MAIN, lambda p: [TINY, "--config.data.mask_token_prob=0.95"], "data.mask_token_prob=0.95 and data.random_token_prob=0.1"),
  ("sampling_temperature", MAIN, lambda p: [TINY, "--config.model.family=electra", "--config.model.electra.sampling_temperature=0.0"], "sampling_temperature=0.0 must be > 0"),
  ("dropout", MAIN, lambda p: [TINY, "--config.model.hidden_dropout_rate=1.0"], "hidden_dropout_rate=1.0"),
  ("short_seq_prob", MAIN, lambda p: [TINY, "--config.data.short_seq_prob=-0.1"], "short_seq_prob is -0.1"),
  ("zero_steps", MAIN, lambda p: [TINY, "--config.num_train_steps=0"], "num_train_steps=0"),
  ("zero_keep", MAIN, lambda p: [TINY, "--config.max_checkpoints_to_keep=0"], "max_checkpoints_to_keep=0"),
  ("zero_mesh", MAIN, lambda p: [TINY, "--config.mesh.data=0"], "mesh.data=0"),
  ("nan_eps", MAIN, lambda p: [TINY, "--config.optimizer.eps=nan"], "optimizer.eps=nan"),
  ("lease", MAIN, lambda p: [TINY, "--config.lock_lease_secs=0.0"], "lock_lease_secs=0.0"),
  # Segment memory (data.objective='clm') and the permutation LM.
  ("clm_negative_mem_len", MAIN, lambda p: [XL_TINY, "--config.model.recurrence.mem_len=-1"], "model.recurrence.mem_len=-1 must be >= 0"),
  ("clm_eval_mem_len", MAIN, lambda p: [XL_TINY, "--config.model.recurrence.eval_mem_len=-2"], "model.recurrence.eval_mem_len=-2 must be >= -1"),
  ("moved_model_key", MAIN, lambda p: [XL_TINY, "--config.model.mem_len=8"], "model.mem_len is now model.recurrence.mem_len"),
  ("moved_model_key_finetune", MAIN, lambda p: [f"--config={run_helpers.REPO}/configs/finetune/glue.py:mrpc", "--config.model.span_boundary_objective=True"], "model.span_boundary_objective is now model.span_boundary.enabled"),
  ("clm_family_without_memory", MAIN, lambda p: [TINY, "--config.data.objective=clm"], "needs a family with Transformer-XL memory (xlnet, transformer_xl)"),
  ("clm_not_causal", MAIN, lambda p: [XL_TINY, "--config.model.causal=False"], "set model.causal=True"),
  ("clm_segments_do_not_fit", MAIN, lambda p: [XL_TINY, "--config.global_batch_size=65536"], "do not give 65536 rows one 32-token segment"),
  ("clm_records", MAIN, lambda p: [XL_TINY, f"--config.data.tfrecord_pattern={p['root']}/none-*.tfrecord"], "unset data.tfrecord_pattern"),
  ("clm_distillation", MAIN, lambda p: [XL_TINY, "--config.task=distillation"], "data.objective='clm' is a pretraining objective"),
  ("memory_length_no_workdir", _with_name(memory_length.main), lambda p: [XL_TINY, "--eval_mem_lens=0,32"], "--config needs --workdir"),
  ("memory_length_negative", _with_name(memory_length.main), lambda p: ["--family=xlnet", "--mem_lens=-1", "--steps=1"], "memory lengths must be >= 0"),
  ("memory_length_no_family", _with_name(memory_length.main), lambda p: ["--mem_lens=0", "--steps=1"], "the byte LM needs --family, one with segment memory: xlnet or transformer_xl (got None)"),
  ("permutation_predicts_nothing", MAIN, lambda p: [XLNET_TINY, "--config.data.max_predictions_per_seq=0"], "data.max_predictions_per_seq is 0"),
  ("transformer_xl_not_causal", MAIN, lambda p: [TINY, "--config.model.family=transformer_xl"], "is a causal LM"),
  ("transformer_xl_same_length", MAIN, lambda p: [TINY, "--config.model.family=transformer_xl", "--config.model.causal=True", "--config.model.recurrence.same_length=True"], "but model.recurrence.mem_len=0"),
  ("transformer_xl_masked_lm", MAIN, lambda p: [TINY, "--config.model.family=transformer_xl", "--config.model.causal=True"], "has no masked-LM pretraining"),
  # Workdirs.
  ("workdir_is_file", MAIN, lambda p: [TINY, f"--workdir={p['a_file']}"], "a_file"),
  ("workdir_unwritable", MAIN, lambda p: [TINY, "--workdir=/sys/kernel/bert_jax_run"], "/sys/kernel/bert_jax_run"),
  ("another_model", MAIN, lambda p: [TINY, f"--workdir={p['run']}", "--config.model.size=mini"], "holds a run with model."),
  # Data.
  ("corpus_missing", MAIN, lambda p: [TINY, f"--config.data.corpus_paths=('{p['missing']}',)"], "missing.txt"),
  ("corpus_is_directory", MAIN, lambda p: [TINY, f"--config.data.corpus_paths=('{p['directory']}',)"], "is a directory"),
  ("corpus_binary", MAIN, lambda p: [TINY, f"--config.data.corpus_paths=('{p['binary']}',)"], "UTF-8"),
  ("corpus_one_sentence", MAIN, lambda p: [TINY, f"--config.data.corpus_paths=('{p['one_sentence']}',)"], "has 1 document(s) but needs at least"),
  ("vocab_missing", MAIN, lambda p: [TINY, f"--config.data.vocab_path={p['missing']}"], "missing.txt"),
  ("records_match_nothing", MAIN, lambda p: [TINY, f"--config.data.tfrecord_pattern={p['root']}/none-*.tfrecord"], "none-*.tfrecord"),
  ("init_from_missing", MAIN, lambda p: [TINY, f"--config.init_from={p['missing']}"], "missing.txt"),
  ("finetune_binary", MAIN, lambda p: [f"--config={run_helpers.REPO}/configs/finetune/glue.py:mrpc", f"--config.data.train_path={p['binary']}", f"--config.data.eval_path={p['binary']}", f"--config.init_from={p['run']}", *finetune_fixtures.model_flags()], "UTF-8"),
  # synthetic_pairs.
  ("pairs_sizes", _with_name(synthetic_pairs.main), lambda p: [f"--output={p['root']}/pairs", "--min_length=5", "--max_length=3"], "--min_length=5, --max_length=3"),
  ("pairs_flag", _with_name(synthetic_pairs.main), lambda p: [f"--output={p['root']}/pairs", "--pairs=many"], "--pairs=many: invalid literal for int()"),
  # train_vocab.
  ("vocab_binary", _with_name(train_vocab.main), lambda p: [f"--input={p['binary']}", f"--output={p['root']}/v1.txt", "--vocab_size=1000"], "binary.bin is not UTF-8 text"),
  ("vocab_mostly_binary", _with_name(train_vocab.main), lambda p: [f"--input={p['mostly_binary']}", f"--output={p['root']}/v5.txt", "--vocab_size=100"], "mostly_binary.bin is not UTF-8 text (20 undecodable lines, 3 of text)"),
  ("vocab_too_big", _with_name(train_vocab.main), lambda p: [f"--input={p['text']}", f"--output={p['root']}/v2.txt", "--vocab_size=5000"], "--vocab_size=5000"),
  ("vocab_output_under_file", _with_name(train_vocab.main), lambda p: [f"--input={p['text']}", f"--output={p['a_file']}/v.txt", "--vocab_size=100"], "a_file"),
  ("vocab_input_missing", _with_name(train_vocab.main), lambda p: [f"--input={p['missing']}", f"--output={p['root']}/v3.txt"], "missing.txt"),
  ("vocab_no_output", _with_name(train_vocab.main), lambda p: [f"--input={p['text']}"], "error: --output is required; see --help"),
  ("vocab_size_not_int", _with_name(train_vocab.main), lambda p: [f"--input={p['text']}", f"--output={p['root']}/v6.txt", "--vocab_size=abc"], "--vocab_size=abc: invalid literal for int()"),
  ("vocab_kind", _with_name(train_vocab.main), lambda p: [f"--input={p['text']}", f"--output={p['root']}/v4.txt", "--kind=bpe"], "--kind"),
  # create_pretraining_data.
  ("records_no_output_dir", _with_name(create_pretraining_data.main), lambda p: [VOCAB, f"--input={p['text']}"], "error: --output_dir is required; see --help"),
  ("records_bad_style", _with_name(create_pretraining_data.main), lambda p: [VOCAB, f"--input={p['text']}", f"--output_dir={p['root']}/r4", "--style=packed"], "--style=packed: value should be one of <pairs|full_sentences>"),
  ("records_output_is_file", _with_name(create_pretraining_data.main), lambda p: [VOCAB, f"--input={p['text']}", f"--output_dir={p['a_file']}"], "a_file"),
  ("records_input_missing", _with_name(create_pretraining_data.main), lambda p: [VOCAB, f"--input={p['missing']}", f"--output_dir={p['root']}/r1"], "missing.txt"),
  ("records_binary", _with_name(create_pretraining_data.main), lambda p: [VOCAB, f"--input={p['binary']}", f"--output_dir={p['root']}/r2"], "binary.bin is not UTF-8 text"),
  ("records_mostly_binary", _with_name(create_pretraining_data.main), lambda p: [VOCAB, f"--input={p['mostly_binary']}", f"--output_dir={p['root']}/r3"], "mostly_binary.bin is not UTF-8 text (20 undecodable lines, 3 of text)"),
  # convert and embed.
  ("convert_input_missing", _with_name(convert.main), lambda p: ["--to=hf", f"--input={p['missing']}", f"--output={p['root']}/hf"], "--input"),
  ("convert_no_direction", _with_name(convert.main), lambda p: [f"--input={p['run']}", f"--output={p['root']}/hf2"], "--from"),
  ("embed_checkpoint_missing", _with_name(embed.main), lambda p: [f"--checkpoint={p['missing']}", f"--input={p['text']}", f"--output={p['root']}/e.npz"], "--checkpoint"),
  ("embed_binary_input", _with_name(embed.main), lambda p: [f"--checkpoint={p['run']}", f"--input={p['binary']}", f"--output={p['root']}/e2.npz"], "UTF-8"),
  ("analyze_attention_not_conllu", _with_name(analyze_attention.main), lambda p: [f"--checkpoint={p['run']}", f"--conllu={p['text']}", f"--output_dir={p['root']}/a"], "and so no HEAD / DEPREL"),
  # Benchmarks.
  ("benchmark_attention_kind", ABSL, lambda p: [TINY, "--config.model.attention_kind=sparse"], "attention_kind"),
  ("benchmark_layer_norm_kind", ABSL, lambda p: [TINY, "--config.model.layer_norm_kind=pallas"], "model.layer_norm_kind='pallas' is unknown; choose one of auto, xla, triton"),
  ("benchmark_batch", ABSL, lambda p: [TINY, "--config.global_batch_size=3"], "global_batch_size"),
  ("benchmark_key", ABSL, lambda p: [TINY, "--config.model.hidden=3"], "no key 'hidden'"),
  ("benchmark_hf_torch_family", ABSL, lambda p: [f"--config={run_helpers.REPO}/configs/electra_tiny.py", "--baseline=hf_torch"], "model.family='electra'"),
  ("benchmark_torch_compile_alone", ABSL, lambda p: [TINY, "--torch_compile"], "add --baseline=hf_torch"),
  ("benchmark_data_nothing", _with_name(benchmark_data.main), lambda p: [f"--tfrecord_pattern={p['root']}/none-*"], "none-*"),
  ("benchmark_data_corrupt", _with_name(benchmark_data.main), lambda p: [f"--tfrecord_pattern={p['corrupt']}", "--num_batches=1", "--warmup_batches=0", "--batch_size=2"], "corrupt"),
  ("benchmark_data_not_int", _with_name(benchmark_data.main), lambda p: ["--batch_size=abc"], "--batch_size=abc: invalid literal for int()"),
  ("benchmark_attention_not_int", _tool(lambda argv: runner.run_absl(benchmark_attention.main, ["benchmark_attention", *argv])), lambda p: ["--d_model=abc"], "abc"),
  ("gpu_attention_points", _tool(lambda argv: runner.run_absl(benchmark_gpu_attention.main, ["benchmark_gpu_attention", *argv])), lambda p: ["--points=big"], "--points: 'big' is not BATCHxSEQ"),
  ("gpu_attention_flash_launch", _tool(lambda argv: runner.run_absl(benchmark_gpu_attention.main, ["benchmark_gpu_attention", *argv])), lambda p: ["--flash_launch=128/8"], "flash launch '128/8': write FORWARD_BLOCK/FORWARD_WARPS/BACKWARD_BLOCK/BACKWARD_WARPS/STAGES"),
  ("gpu_layer_norm_points", _tool(lambda argv: runner.run_absl(benchmark_gpu_layer_norm.main, ["benchmark_gpu_layer_norm", *argv])), lambda p: ["--shapes=big"], "--shapes: 'big' is not ROWSxWIDTH"),
  ("gpu_layer_norm_launch", _tool(lambda argv: runner.run_absl(benchmark_gpu_layer_norm.main, ["benchmark_gpu_layer_norm", *argv])), lambda p: ["--norm_launch=4/4/3/64/4"], "layer norm launch '4/4/3/64/4': write five powers of two"),
  ("gpu_layer_norm_launch_rows", _tool(lambda argv: runner.run_absl(benchmark_gpu_layer_norm.main, ["benchmark_gpu_layer_norm", *argv])), lambda p: ["--norm_launch=4/4/128/64/4"], "BACKWARD_ROWS 128 exceeds BACKWARD_ROWS_PER_PROGRAM 64"),
  ("aot_compile_unknown_flag", _with_name(aot_compile.main), lambda p: ["--topolgy=v4-8"], "topolgy"),
  ("export_task_unknown_flag", _with_name(export_task.main), lambda p: ["--wrokdir=/tmp/x"], "wrokdir"),
  ("config_keys_flag", _with_name(config_keys.main), lambda p: ["--fine_tuning=maybe"], "--fine_tuning"),
  ("corpus_unknown_flag", _with_name(build_default_corpus.main), lambda p: ["--sourse=x"], "Unknown command line flag 'sourse'. Did you mean: source ?"),
  ("benchmark_sizes", _with_name(benchmark_create_pretraining_data.main), lambda p: ["--sizes_mb=big"], "--sizes_mb"),
  ("corpus_source_missing", _with_name(build_default_corpus.main), lambda p: [f"--source={p['missing']}", f"--output_dir={p['root']}/c"], "missing.txt does not exist; pass a Wikipedia .xml.bz2 dump"),
]  # fmt: skip


# Modules of bert_jax/tools and bert_jax/bench with a `main` that have no case above, and why.
NOT_IN_TABLE = {
  # Defines absl flags (--lengths, --rounds) that benchmark_attention / benchmark define too, so
  # it cannot be imported beside them; it ends in the same `runner.run_absl`.
  "benchmark_reformer_pytorch",
  # Likewise (--config, --steps, --rounds as benchmark has them); their bad-input cases run them
  # in subprocesses in test_benchmark.py.
  "benchmark_variants",
  "profile_table",
}


def test_every_tool_has_a_case():
  source = pathlib.Path(__file__).read_text(encoding="utf-8")
  tools = sorted(
    path.stem
    for package in ("tools", "bench")
    for path in (run_helpers.REPO / "bert_jax" / package).glob("*.py")
    if "\ndef main(" in path.read_text(encoding="utf-8")
  )
  assert len(tools) >= 19, tools
  assert [t for t in tools if f"{t}.main" not in source and t not in NOT_IN_TABLE] == []


@pytest.mark.parametrize("case_id,entry,make_argv,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(paths, capsys, case_id, entry, make_argv, expected):
  before = _digest(paths["run"] / "checkpoints")
  argv = make_argv(paths)
  if entry == MAIN:
    sys.modules.pop("config_config", None)  # config_flags re-executes config files into it.
    if not any(a.startswith("--workdir") for a in argv) and "--no-workdir" not in argv:
      argv.append(f"--workdir={paths['fresh'](case_id)}")
    argv = [a for a in argv if a != "--no-workdir"]
    status = main.run(["main", *argv, NO_CACHE])
  elif entry == ABSL:
    status = runner.run_absl(benchmark.main, ["benchmark", *argv])
  else:
    status = entry(argv)
  err = capsys.readouterr().err
  lines = [line for line in err.strip().splitlines() if line.strip()]
  assert status == 2, err[-2000:]
  assert [line for line in lines if line.startswith("error:")] == lines[-1:], err[-2000:]
  assert len(lines[-1]) < 300, lines[-1:]
  assert expected in lines[-1], lines[-1]
  assert "Traceback" not in err, err[-3000:]
  assert _digest(paths["run"] / "checkpoints") == before
