"""`hymt translate` as a user runs it: output on stdout, progress on stderr, exit codes 0 / 1 / 2 with one line."""

import json
import os
import random
import subprocess
import sys

import pytest

SAMPLES = [
    "Hello world. How are you?",
    "你好，世界。今天天气很好！",
    "Bonjour le monde.",
    "  indented line  ",
    "",
    "\t",
    "Привет, мир! Как дела?",
    "བཀྲ་ཤིས་བདེ་ལེགས། ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།",
    "مرحبا بالعالم",
    "สวัสดีครับ ยินดีที่ได้รู้จัก",
    "12345",
    "こんにちは。元気ですか？",
    "",
    "",
]


def run(*args, stdin=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hymt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HYMT_MAX_NEW_TOKENS": "6", **(env or {})},
    )


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
    result = run(
        "translate",
        "--model",
        str(test_model),
        "--to",
        "de",
        "--greedy",
        "--stats",
        "-",
        stdin="One line.\nTwo lines.\nThree.",
    )
    assert result.returncode == 0, result.stderr
    stats = json.loads(next(line for line in result.stderr.splitlines() if line.startswith('{"stats"')))["stats"]
    assert stats["segments"] == stats["segments_done"] == 3 and stats["tokens_out"] > 0
    assert stats["profile"] == "cpu" and stats["oom_events"] == 0 and stats["seconds"] > 0


def test_stdin_and_source_language(test_model):
    result = run(
        "translate",
        "--model",
        str(test_model),
        "--to",
        "zh",
        "--from",
        "en",
        "--greedy",
        "-",
        stdin="One line.\nTwo lines.",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        (["translate", "--to", "klingon"], "unsupported target language"),
        (["translate", "--to", "en", "/no/such/file.txt"], "cannot read /no/such/file.txt"),
        (["translate", "--to", "en", "--max-segment-tokens", "3"], "HYMT_MAX_SEGMENT_TOKENS"),
        (["translate"], "the following arguments are required: --to"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(test_model, args, needle):
    result = run(*args, "--model", str(test_model)) if args[0] == "translate" else run(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr


def test_a_bad_log_level_is_one_line_with_the_other_settings():
    """HYMT_LOG_LEVEL is checked as the settings are read: one line and exit 2, not a traceback from logging."""
    result = run("serve", "--model", "/no/such/model", env={"HYMT_LOG_LEVEL": "bogus"})
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "HYMT_LOG_LEVEL must be one of debug, info, warning, error, critical, not 'bogus'" in result.stderr


def test_a_reader_that_leaves_early_ends_it_quietly():
    """`hymt profile | head -c 1`: the reader is gone before the plan is printed; no BrokenPipeError traceback."""
    child = subprocess.Popen(
        [sys.executable, "-m", "hymt", "profile", "--family", "hy-mt2-1.8b", "--gpu-memory-gb", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    assert child.wait(timeout=600) == 141
    assert child.stderr.read() == ""


@pytest.mark.parametrize(
    "model,needle", [("/no/such/model", "does not exist"), ("some-org/not-downloadable-here", "cannot fetch")]
)
def test_unloadable_model_exits_1_with_one_line(model, needle):
    result = run("translate", "--model", model, "--to", "en", "-", stdin="hi", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 1
    # What the loading did so far, then one line that says why it failed.
    *said, error = result.stderr.strip().splitlines()
    assert all(line.startswith("hymt: loading") for line in said), result.stderr
    assert error.startswith("hymt: error: ") and needle in error


def test_wrong_architecture_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert", "architectures": ["BertModel"]}')
    result = run("translate", "--model", str(tmp_path), "--to", "en", "-", stdin="hi")
    assert result.returncode == 1
    assert "hymt serves the Hunyuan-MT family" in result.stderr.strip().splitlines()[-1]


def test_make_test_model(tmp_path):
    result = run("make-test-model", str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m" / "model.safetensors").is_file()


def test_documents_by_extension(test_model, tmp_path):
    import docx

    import samples

    source = tmp_path / "report.docx"
    source.write_bytes(samples.docx_structured())
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

    result = run("translate", "--to", "de", str(tmp_path / "a.key"), "-o", str(tmp_path / "b.key"))
    assert result.returncode == 2 and ".key is not a supported format" in result.stderr


@pytest.mark.parametrize(
    "name,output,needle",
    [
        ("letter.rtf", None, ".rtf is not a supported format; supported: .txt, .md"),
        ("slides.key", None, ".key is not a supported format"),
        ("README", None, "a file without an extension is not a supported format"),
        ("notes.txt", "notes.docx", "the output must end in .txt too"),
        ("deck.pptx", "deck.txt", "the output must end in .pptx too"),
    ],
)
def test_the_file_types_are_the_servers(tmp_path, name, output, needle):
    """Exactly what the server's /translate_file takes (documents.FORMATS), refused before any model loads."""
    (tmp_path / name).write_bytes(b"{\\rtf1 Hello}" if name.endswith(".rtf") else b"%PDF-1.4 hello")
    extra = ["-o", str(tmp_path / output)] if output else []
    result = run("translate", "--to", "de", "--model", "/no/such/model", str(tmp_path / name), *extra)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr


def test_a_broken_document_is_refused_before_the_model_libraries_load(tmp_path):
    """Reading the document comes first; torch and transformers (seconds to import) only once it holds text."""
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip archive")
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hymt", "translate", "--to", "de", str(tmp_path / "broken.docx")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert result.returncode == 2 and said == [
        "hymt: error: could not read this .docx file: it is not a zip archive (File is not a zip file)"
    ], result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert any(name.startswith("hymt.documents") for name in imported)  # the document was read
    assert not {"torch", "transformers"} & imported


def test_loading_is_announced(test_model):
    result = run("translate", "--model", str(test_model), "--to", "de", "--greedy", "-", stdin="Hello.")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"hymt: loading {test_model} (profile cpu)")
    assert "hymt: loading weights" in result.stderr and "hymt: model ready" in result.stderr


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    from servers import serving

    with serving(test_model, tmp_path_factory.mktemp("logs") / "cli.log", HYMT_API_KEYS="k1") as srv:
        yield srv


def test_through_a_running_server(server, tmp_path):
    import docx

    import samples

    lines = ["First line.", "", "  Indented second.", "Third."]
    result = run(
        "translate", "--server", server.url, "--api-key", "k1", "--to", "de", "-", stdin="\n".join(lines) + "\n"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.split("\n")
    assert len(out) == 5 and out[1] == "" and out[2].startswith("  ") and out[4] == ""
    assert f"hymt: sending stdin.txt to {server.url}" in result.stderr and "hymt: loading" not in result.stderr

    source = tmp_path / "report.docx"
    source.write_bytes(samples.docx_structured())
    result = run("translate", "--server", server.url, "--api-key", "k1", "--to", "fr", str(source))
    assert result.returncode == 0, result.stderr
    assert f"{tmp_path / 'report.fr.docx'}: 7 segments translated" in result.stderr
    assert len(docx.Document(str(tmp_path / "report.fr.docx")).tables) == 1


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["--api-key", "wrong"], 2, "the server answered 403: invalid API key"),
        (["--greedy"], 2, "--greedy is for a model loaded here"),
        (["--model", "/x"], 2, "--model is for a model loaded here"),
    ],
)
def test_server_refusals_are_one_line(server, args, code, needle):
    result = run("translate", "--server", server.url, "--to", "de", *args, "-", stdin="Hello.")
    errors = [line for line in result.stderr.splitlines() if line.startswith("hymt: error: ")]
    assert result.returncode == code and len(errors) == 1 and needle in errors[0], result.stderr


def test_an_unreachable_server_is_one_line():
    from servers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    result = run("translate", "--server", url, "--to", "de", "-", stdin="Hello.")
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"hymt: error: cannot reach the hymt server at {url}")
