"""Run alone by test_conftest (its name is no test_*.py: the suite does not collect it): a test that writes the
pinbench cache, and says where."""

from pathlib import Path

import pytest

from pinbench.core.files import YAML_CACHE_DIR, cache_root, read_yaml


def test_reading_yaml_keeps_its_parse_in_the_cache(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("a: 1\n")
    assert read_yaml(tmp_path / "a.yaml") == {"a": 1}
    assert list((cache_root() / YAML_CACHE_DIR).glob("*.json"))
    print(f"cache: {cache_root()}")


@pytest.mark.gpu
def test_a_gpu_test_sees_the_cache_the_shell_names() -> None:
    print(f"gpu cache: {cache_root()}")
