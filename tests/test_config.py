import pytest

from folio.dataflows.config import config_files, load_config
from folio.nodes.types import FolioError


def test_defaults_select_the_embedded_no_llm_local_variants():
    config = load_config(environ={})
    assert (config["kiwix"], config["llm"], config["executor"], config["search_mode"]) == (
        "libzim",
        "none",
        "local",
        "hybrid",
    )


def test_environment_overrides_a_key_by_its_upper_case_name():
    config = load_config(environ={"KIWIX_MAX_BOOKS": "3", "SEARCH_MODE": "lexical"})
    assert config["kiwix_max_books"] == 3
    assert config["search_mode"] == "lexical"


def test_explicit_overrides_win_over_environment():
    config = load_config(overrides={"search_k": 7}, environ={"SEARCH_K": "3"})
    assert config["search_k"] == 7


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
