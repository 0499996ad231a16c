"""`hymt translate` as a user runs it: output on stdout, progress on stderr, exit codes 0 / 1 / 2 with one line."""

import json
import os
import random
import subprocess
import sys

import pytest

SAMPLES = ["Hello world. How are you?", "你好，世界。今天天气很好！", "Bonjour le monde.", "  indented line  ", "",
           "\t",
           "Привет, мир! Как дела?", "བཀྲ་ཤིས་བདེ་ལེགས། ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།", "مرحبا بالعالم",
           "สวัสดีครับ ยินดีที่ได้รู้จัก", "12345", "こんにちは。元気ですか？", "", ""]


def run(*args, stdin=None, env=None):
    return subprocess.run([sys.executable, "-m", "hymt", *args], input=stdin, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HYMT_MAX_NEW_TOKENS": "6", **(env or {})})


def test_two_hundred_mixed_lines_in_two_hundred_out(test_model, tmp_path):
    rng = random.Random(7)
    lines = [rng.choice(SAMPLES) for _ in range(200)]
    source = tmp_path / "mixed.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("translate", "--model", str(test_model), "--to", "en", "--greedy", str(source))
    assert result.returncode == 0, result.stderr
    out_lines = result.stdout.split("\n")
    assert len(out_lines) == 201 and out_lines[-1] == ""
    for before, after in zip(lines, out_lines):
        assert (before.strip() == "") == (after.strip() == "")
        if before.strip() == "":
            assert after == before
    assert "translating" in result.stderr  # the progress bar


def test_stats_summarise_the_run_on_stderr(test_model):
    result = run("translate", "--model", str(test_model), "--to", "de", "--greedy", "--stats", "-",
                 stdin="One line.\nTwo lines.\nThree.")
    assert result.returncode == 0, result.stderr
    stats = json.loads(next(line for line in result.stderr.splitlines() if line.startswith('{"stats"')))["stats"]
    assert stats["segments"] == stats["segments_done"] == 3 and stats["tokens_out"] > 0
    assert stats["profile"] == "cpu" and stats["oom_events"] == 0 and stats["seconds"] > 0


def test_stdin_and_source_language(test_model):
    result = run("translate", "--model", str(test_model), "--to", "zh", "--from", "en", "--greedy", "-",
                 stdin="One line.\nTwo lines.")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1


@pytest.mark.parametrize("args,needle", [
    (["translate", "--to", "klingon"], "unsupported target language"),
    (["translate", "--to", "en", "/no/such/file.txt"], "cannot read /no/such/file.txt"),
    (["translate", "--to", "en", "--max-segment-tokens", "3"], "HYMT_MAX_SEGMENT_TOKENS"),
    (["translate"], "the following arguments are required: --to"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_exit_2_with_one_line(test_model, args, needle):
    result = run(*args, "--model", str(test_model)) if args[0] == "translate" else run(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr


@pytest.mark.parametrize("model,needle", [("/no/such/model", "does not exist"),
                                          ("some-org/not-downloadable-here", "cannot fetch")])
def test_unloadable_model_exits_1_with_one_line(model, needle):
    result = run("translate", "--model", model, "--to", "en", "-", stdin="hi",
                 env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr


def test_wrong_architecture_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert", "architectures": ["BertModel"]}')
    result = run("translate", "--model", str(tmp_path), "--to", "en", "-", stdin="hi")
    assert result.returncode == 1
    assert "hymt serves the Hunyuan-MT family" in result.stderr


def test_make_test_model(tmp_path):
    result = run("make-test-model", str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m" / "model.safetensors").is_file()


def test_documents_by_extension(test_model, tmp_path):
    import docx

    sys.path.insert(0, os.path.dirname(__file__))
    from test_documents import _docx

    source = tmp_path / "report.docx"
    source.write_bytes(_docx())
    out = tmp_path / "out.docx"
    result = run("translate", "--model", str(test_model), "--to", "fr", "--greedy", str(source), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "report.docx" in result.stderr and "7 segments translated" in result.stderr  # bar, then summary
    after = docx.Document(str(out))
    assert len(after.tables) == 1 and after.paragraphs[0].style.name == "Heading 1"

    notes = tmp_path / "notes.md"
    notes.write_text("# Title\n\n```\ncode stays\n```\n", encoding="utf-8")
    result = run("translate", "--model", str(test_model), "--to", "de", "--greedy", str(notes))
    assert result.returncode == 0, result.stderr
    assert "```\ncode stays\n```\n" in (tmp_path / "notes.de.md").read_text(encoding="utf-8")

    result = run("translate", "--to", "de", str(tmp_path / "a.pdf"), "-o", str(tmp_path / "b.pdf"))
    assert result.returncode == 2 and ".pdf is not a supported format" in result.stderr
