"""DeepL's text API, stored glossaries and usage, through the official `deepl` package and raw HTTP, on real servers
on the test model (keys on): translate_text with many texts and with tags, the language lists, usage, the glossary
calls, a stored glossary used by every API and kept across a restart, keys, and each error's shape and status."""

from __future__ import annotations

import deepl
import httpx
import pytest

from servers import Server

# Generous timeouts: a loaded 2-core machine answers slowly, and what is tested is the answer, not its speed.
HTTP = httpx.Client(timeout=120)
deepl.http_client.min_connection_timeout = 120
KEYS = ("deepl-key-1", "deepl-key-2")
ENV = {"HYMT_API_KEYS": ",".join(KEYS)}
POST = (
    '<p>New release! Read <a href="https://example.org/notes" rel="nofollow">the notes</a> and '
    '<a href="https://example.org/@hymt" class="mention">follow us</a>.</p>'
)


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    srv = Server(test_model, tmp_path_factory.mktemp("logs") / "deepl.log", **ENV)
    srv.wait_healthy()
    yield srv
    srv.stop()


def client(server: Server, key: str = KEYS[0]) -> deepl.Translator:
    return deepl.Translator(key, server_url=server.url)


def headers(key: str = KEYS[0]) -> dict:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


def test_translate_text_takes_many_texts_and_detects_their_language(server):
    results = client(server).translate_text(["Good morning, my friend.", "Thank you very much."], target_lang="DE")
    assert len(results) == 2 and all(r.text for r in results)
    assert all(r.detected_source_lang == "EN" for r in results)
    assert [r.billed_characters for r in results] == [24, 20]
    one = client(server).translate_text("Bonjour tout le monde.", source_lang="FR", target_lang="EN-US")
    assert one.detected_source_lang == "FR" and one.text


def test_html_keeps_both_links_of_a_mastodon_post(server):
    result = client(server).translate_text(POST, target_lang="DE", tag_handling="html")
    assert 'href="https://example.org/notes"' in result.text and 'href="https://example.org/@hymt"' in result.text
    assert result.text.startswith("<p>") and result.text.count("</a>") == 2
    # hymt's own /translate with format html takes the same path (Mastodon's request shape).
    body = HTTP.post(
        f"{server.url}/translate",
        json={"q": POST, "source": "en", "target": "de", "format": "html", "api_key": KEYS[0]},
        timeout=120,
    ).json()
    assert 'href="https://example.org/notes"' in body["translatedText"]
    assert 'href="https://example.org/@hymt"' in body["translatedText"]


def test_ignored_tags_and_xml_are_written_back_untranslated(server):
    html = client(server).translate_text(
        "<p>Run <kbd>make</kbd> then <span class='x'>keep this</span>.</p>",
        target_lang="FR",
        tag_handling="html",
        ignore_tags=["span"],
    )
    assert "<kbd>make</kbd>" in html.text and '<span class="x">keep this</span>' in html.text
    xml = client(server).translate_text(
        "<doc><title>A title.</title><p>Some <b>bold</b> words.</p><code>x = 1</code></doc>",
        target_lang="FR",
        tag_handling="xml",
        splitting_tags=["title", "p"],
        ignore_tags=["code"],
    )
    assert xml.text.startswith("<doc><title>") and "<code>x = 1</code></doc>" in xml.text and "<b>" in xml.text
    # A text that is not XML is translated as the plain text it is, not refused.
    assert client(server).translate_text("1 < 2 & 3 > 0", target_lang="FR", tag_handling="xml").text


def test_language_lists_use_deepl_codes(server):
    sources = {lang.code: lang.name for lang in client(server).get_source_languages()}
    targets = {lang.code: lang for lang in client(server).get_target_languages()}
    assert len(sources) == 38 and sources["DE"] == "German" and "BO" in sources and "EN-GB" not in sources
    assert {"EN-GB", "EN-US", "PT-BR", "PT-PT", "ZH-HANS", "ZH-HANT", "DE"} <= set(targets)
    assert "EN" not in targets and targets["DE"].supports_formality is False  # Hunyuan-MT-7B has no style prompt
    pairs = client(server).get_glossary_languages()
    assert len(pairs) == 38 * 37 and any(p.source_lang == "en" and p.target_lang == "de" for p in pairs)


def test_usage_counts_each_keys_characters(server):
    before = client(server, KEYS[1]).get_usage()
    assert before.character.valid and not before.any_limit_reached
    client(server, KEYS[1]).translate_text("Twelve chars", target_lang="DE")
    HTTP.post(
        f"{server.url}/translate", json={"q": "Hi there", "source": "en", "target": "de", "api_key": KEYS[1]}
    ).raise_for_status()
    after = client(server, KEYS[1]).get_usage()
    assert after.character.count == before.character.count + 12 + 8
    assert after.character.limit == 10**12


def test_glossaries_are_made_listed_read_used_and_deleted(server):
    translator = client(server)
    glossary = translator.create_glossary("Hardware", "EN", "DE", {"GPU": "Grafikkarte", "driver": "Treiber"})
    assert glossary.entry_count == 2 and glossary.ready and (glossary.source_lang, glossary.target_lang) == ("EN", "DE")
    assert glossary.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    assert translator.get_glossary(glossary.glossary_id).name == "Hardware"
    assert translator.get_glossary_entries(glossary) == {"GPU": "Grafikkarte", "driver": "Treiber"}
    assert translator.translate_text("The GPU is fast.", source_lang="EN", target_lang="DE", glossary=glossary).text
    # hymt's /translate reports the stored terms as it reports inline ones: they reached the prompt.
    body = HTTP.post(
        f"{server.url}/translate",
        json={"q": "The GPU needs a driver.", "source": "en", "target": "de", "glossary_id": glossary.glossary_id},
        headers=headers(),
    ).json()
    assert body["glossary"]["terms_applied"] == 2
    from_csv = translator.create_glossary_from_csv("CSV", "EN", "FR", csv_data='"GPU, card",carte graphique\n')
    assert translator.get_glossary_entries(from_csv) == {"GPU, card": "carte graphique"}
    # Another key sees neither.
    other = client(server, KEYS[1])
    assert glossary.glossary_id not in [g.glossary_id for g in other.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        other.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="Glossary not found"):  # translate_text's 404 is not typed
        other.translate_text("The GPU.", source_lang="EN", target_lang="DE", glossary=glossary.glossary_id)
    translator.delete_glossary(glossary)
    translator.delete_glossary(from_csv)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(glossary.glossary_id)


def test_a_stored_glossary_reaches_a_document_job(server, tmp_path):
    translator = client(server)
    glossary = translator.create_glossary("Docs", "EN", "DE", {"GPU": "Grafikkarte"})
    source, out = tmp_path / "a.txt", tmp_path / "a.de.txt"
    source.write_text("The GPU is fast.\nA second line.\n")
    translator.translate_document_from_filepath(source, out, source_lang="EN", target_lang="DE", glossary=glossary)
    assert out.read_text().count("\n") == 2
    wrong_pair = HTTP.post(
        f"{server.url}/translate_file",
        files={"file": ("a.txt", b"The GPU.")},
        data={"source": "en", "target": "fr", "glossary_id": glossary.glossary_id},
        headers=headers(),
    )
    assert wrong_pair.status_code == 409 and wrong_pair.json()["error_type"] == "glossary_language_mismatch"


def test_keys_are_checked(server):
    with pytest.raises(deepl.AuthorizationException):
        client(server, "not-a-key").translate_text("Hello.", target_lang="DE")
    with pytest.raises(deepl.AuthorizationException):
        client(server, "not-a-key").get_usage()
    assert HTTP.post(f"{server.url}/v2/translate", data={"text": "Hi", "target_lang": "DE"}).status_code == 403
    form = HTTP.post(
        f"{server.url}/v2/translate", data={"text": ["One.", "Two."], "target_lang": "DE", "auth_key": KEYS[0]}
    )
    assert form.status_code == 200 and len(form.json()["translations"]) == 2


@pytest.mark.parametrize(
    "body,status,needle",
    [
        ({"text": ["Hi"], "target_lang": "XX"}, 400, "target_lang"),
        ({"text": ["Hi"]}, 400, "target_lang"),
        ({"target_lang": "DE"}, 400, "text"),
        ({"text": ["x" * 20001], "target_lang": "DE"}, 400, "limit"),
        ({"text": ["Hi"], "target_lang": "DE", "tag_handling": "json"}, 400, "tag_handling"),
        ({"text": ["Hi"], "target_lang": "DE", "split_sentences": "2"}, 400, "split_sentences"),
        ({"text": ["Hi"], "target_lang": "DE", "formality": "very"}, 400, "formality"),
        ({"text": ["Hi"], "target_lang": "DE", "formality": {"a": 1}}, 400, "formality"),
        ({"text": ["Hi"], "target_lang": "DE", "preserve_formatting": "1"}, 400, "preserve_formatting"),
        ({"text": ["Hi"], "target_lang": "DE", "glossary_id": "g", "glossary_ids": []}, 400, "combined"),
        (
            {
                "text": ["Hi"],
                "target_lang": "DE",
                "source_lang": "EN",
                "glossary_id": "00000000-0000-0000-0000-000000000000",
            },
            404,
            "Glossary",
        ),
    ],
)
def test_errors_have_deepl_shapes(server, body, status, needle):
    response = HTTP.post(f"{server.url}/v2/translate", json=body, headers=headers())
    assert response.status_code == status and set(response.json()) == {"message"}
    assert needle in response.json()["message"]


def test_glossary_errors_have_deepl_shapes(server):
    url = f"{server.url}/v2/glossaries"
    base = {"name": "G", "source_lang": "en", "target_lang": "de", "entries_format": "tsv"}
    for entries, needle in (("GPU", "line 1"), ("A\tB\nGPU\t ", "line 2"), ("", "entries")):
        response = HTTP.post(url, json={**base, "entries": entries}, headers=headers())
        assert response.status_code == 400 and needle in response.json()["message"], response.text
    assert HTTP.post(url, json={**base, "entries": "a\tb", "source_lang": "xx"}, headers=headers()).status_code == 400
    assert (
        HTTP.post(url, json={**base, "entries": "a\tb", "entries_format": "xlsx"}, headers=headers()).status_code == 400
    )
    assert HTTP.get(f"{url}/nope", headers=headers()).status_code == 404
    assert HTTP.delete(f"{url}/00000000-0000-0000-0000-000000000000", headers=headers()).status_code == 404
    assert HTTP.get(url).status_code == 403


def test_quota_rate_limit_and_a_glossary_that_outlives_a_restart(test_model, tmp_path):
    env = {**ENV, "HYMT_CHARACTER_LIMIT": "30", "HYMT_RATE_LIMIT_PER_KEY": "8"}
    first = Server(test_model, tmp_path / "limits.log", **env)
    try:
        first.wait_healthy()
        glossary = client(first).create_glossary("Kept", "EN", "DE", {"GPU": "Grafikkarte"})
        client(first).translate_text("Thirty-one characters of text.", target_lang="DE")
        with pytest.raises(deepl.QuotaExceededException):
            client(first).translate_text("More.", target_lang="DE")
        over = HTTP.post(f"{first.url}/translate", json={"q": "More.", "target": "de", "api_key": KEYS[0]})
        assert over.status_code == 456 and over.json()["error_type"] == "quota_exceeded"
        statuses = [HTTP.get(f"{first.url}/v2/usage", headers=headers(KEYS[1])) for _ in range(9)]
        assert [r.status_code for r in statuses][:8] == [200] * 8 and statuses[8].status_code == 429
        assert int(statuses[8].headers["Retry-After"]) >= 1 and set(statuses[8].json()) == {"message"}
    finally:
        first.stop()
    again = Server(test_model, first.log_path, **env)
    try:
        again.wait_healthy()
        assert client(again).get_glossary_entries(glossary.glossary_id) == {"GPU": "Grafikkarte"}
        assert client(again).get_usage().character.limit_reached  # the month's count was kept too
    finally:
        again.stop()
