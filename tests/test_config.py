import pytest

from folio.dataflows.config import config_files, load_config
from folio.nodes.core.types import FolioError


def test_defaults_select_the_embedded_no_llm_local_variants():
    config = load_config(environ={})
    assert (config["kiwix"], config["llm"], config["executor"], config["search_mode"]) == (
        "libzim",
        "none",
        "local",
        "hybrid",
    )


def test_environment_overrides_a_key_by_its_folio_prefixed_upper_case_name():
    config = load_config(environ={"FOLIO_KIWIX_MAX_BOOKS": "3", "FOLIO_SEARCH_MODE": "lexical"})
    assert config["kiwix_max_books"] == 3
    assert config["search_mode"] == "lexical"


def test_unprefixed_environment_variables_change_nothing():
    environ = {"LLM": "openai", "SOURCES": "web", "WORKERS": "oops", "SEARCH_MODE": "bogus"}
    assert load_config(environ=environ) == load_config(environ={})


def test_a_list_key_from_the_environment_takes_comma_separated_names():
    assert load_config(environ={"FOLIO_SOURCES": "book, kiwix"})["sources"] == ["book", "kiwix"]
    assert load_config(environ={"FOLIO_SOURCES": "[web]"})["sources"] == ["web"]


def test_explicit_overrides_win_over_environment():
    config = load_config(overrides={"search_k": 7}, environ={"FOLIO_SEARCH_K": "3"})
    assert config["search_k"] == 7


def test_an_unknown_switch_value_from_the_environment_names_the_variable_and_the_allowed_values():
    with pytest.raises(FolioError) as error:
        load_config(environ={"FOLIO_SEARCH_MODE": "bogus"})
    assert str(error.value) == (
        "FOLIO_SEARCH_MODE: search_mode must be one of lexical, semantic, hybrid, bm25s, dense_exact "
        "(got 'bogus')"
    )


@pytest.mark.parametrize(
    ("variable", "raw", "expected"),
    [
        ("FOLIO_WORKERS", "many", "workers must be a whole number (got 'many')"),
        ("FOLIO_SEARCH_K", "99999999999999999999999", "search_k must be from 1 to 10000"),
        ("FOLIO_SEARCH_K", "0", "search_k must be from 1 to 10000 (got 0)"),
        ("FOLIO_FUSION_TIMEOUT_SECONDS", "soon", "fusion_timeout_seconds must be a number"),
        ("FOLIO_FUSION_TIMEOUT_SECONDS", ".nan", "fusion_timeout_seconds must be a number"),
        ("FOLIO_KIWIX_TIMEOUT_SECONDS", "-1", "kiwix_timeout_seconds must be from 0"),
        ("FOLIO_CHUNK_OVERLAP", "1.5", "chunk_overlap must be from 0.0 to 0.9"),
        ("FOLIO_EVAL_ANSWERS", "maybe", "eval_answers must be one of true, false (got 'maybe')"),
        ("FOLIO_SOURCES", "{a: 1}", "sources must be a list of names"),
        ("FOLIO_LLM_MODEL", "3", "llm_model must be text (got 3)"),
        ("FOLIO_SEARCH_MODE", "", "search_mode must be one of"),
        ("FOLIO_LLM_BASE_URL", "", "llm_base_url must be set (got null)"),
        ("FOLIO_LLM_BASE_URL", "[unclosed", "FOLIO_LLM_BASE_URL: not a valid value"),
    ],
)
def test_a_bad_value_from_the_environment_is_one_line_naming_the_variable(variable, raw, expected):
    with pytest.raises(FolioError) as error:
        load_config(environ={variable: raw})
    message = str(error.value)
    assert message.startswith(f"{variable}: ") and expected in message and "\n" not in message


def test_a_bad_value_in_a_config_file_names_the_file_and_key(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("search_k: ten\n")
    with pytest.raises(FolioError, match=r"mine\.yaml \(search_k\): search_k must be a whole number"):
        load_config(path, environ={})


def test_a_bad_explicit_override_names_the_key():
    with pytest.raises(FolioError, match=r"^kiwix: kiwix must be one of libzim, http, none|^kiwix: must be"):
        load_config(overrides={"kiwix": "zim"}, environ={})


def test_nullable_settings_accept_null_and_their_type():
    config = load_config(environ={"FOLIO_WORKERS": "2", "FOLIO_KIWIX_URL": "http://127.0.0.1:1"})
    assert (config["workers"], config["kiwix_url"]) == (2, "http://127.0.0.1:1")
    assert load_config(environ={"FOLIO_WORKERS": ""})["workers"] is None


def test_every_switch_variant_in_the_dags_is_an_allowed_value():
    """CHOICES lists every value a ``@config.when``/``when_in`` of a registered DAG module selects on."""
    import ast
    import inspect

    from folio.dataflows.config import CHOICES, SWITCHES
    from folio.dataflows.registry import DAGS

    seen: dict[str, set] = {}
    modules = {m for dag in DAGS.values() for m in dag.modules}
    for module in modules:
        for call in ast.walk(ast.parse(inspect.getsource(module))):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in ("when", "when_in")
                and getattr(call.func.value, "id", "") == "config"
            ):
                for keyword in call.keywords:
                    value = ast.literal_eval(keyword.value)
                    seen.setdefault(str(keyword.arg), set()).update(
                        value if isinstance(value, list) else [value]
                    )
    assert {"search_mode", "llm", "kiwix"} <= set(seen), seen
    for key, values in seen.items():
        assert key in SWITCHES
        assert values <= set(CHOICES[key]), (key, values - set(CHOICES[key]))


def test_unknown_key_in_a_config_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("serch_mode: lexical\n")
    with pytest.raises(FolioError, match="unknown config key"):
        load_config(path, environ={})


def test_invalid_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("a: [1, 2\n")
    with pytest.raises(FolioError, match=r"broken\.yaml"):
        load_config(path, environ={})


def test_every_shipped_config_loads():
    assert config_files(), "configs/ has no YAML files"
    for path in config_files():
        assert load_config(path, environ={})["embedder"]


def test_an_unknown_source_from_the_environment_is_refused_naming_the_variable() -> None:
    with pytest.raises(FolioError) as info:
        load_config(None, environ={"FOLIO_SOURCES": "book,bogus"})
    assert str(info.value).startswith("FOLIO_SOURCES: sources names 'bogus': use book, kiwix, web, news")


def test_the_allowed_sources_are_fusions_sources() -> None:
    from folio.dataflows.config import LIST_CHOICES
    from folio.nodes.query.source_fusion import KNOWN_SOURCES

    assert LIST_CHOICES["sources"] == KNOWN_SOURCES


def test_a_config_that_is_a_fifo_a_folder_or_not_utf8_is_refused_without_blocking(tmp_path) -> None:
    import os
    import time

    fifo, folder, latin = tmp_path / "pipe.yaml", tmp_path / "dir.yaml", tmp_path / "latin.yaml"
    os.mkfifo(fifo)  # nothing writes: reading it would block forever
    folder.mkdir()
    latin.write_bytes(b"search_k: \xff\n")
    started = time.monotonic()
    for path, why in (
        (fifo, "not a regular file"),
        (folder, "not a regular file"),
        (latin, "not a text file"),
    ):
        with pytest.raises(FolioError) as info:
            load_config(path)
        assert str(info.value).startswith(f"{path}: {why}")
    assert time.monotonic() - started < 5


def test_a_base_that_is_not_a_path_is_refused(tmp_path) -> None:
    path = tmp_path / "my.yaml"
    path.write_text("base: [1, 2]\n")
    with pytest.raises(FolioError, match=r"\(base\): must be the path of a config file"):
        load_config(path)
