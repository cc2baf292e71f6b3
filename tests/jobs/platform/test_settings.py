"""Where the built-in datasets are searched: the settings say, the engine only looks there."""

from __future__ import annotations

import shutil
from pathlib import Path

from archsearch.core.data.catalog import find_idx_files
from archsearch.jobs.platform.settings import Settings
from tests.conftest import TEST_DATASETS


def test_data_dirs_are_the_data_dir_then_the_system_dirs(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, data_dir=tmp_path / "mine", system_data_dirs=(Path("/x"),))
    assert settings.data_dirs == (tmp_path / "mine", Path("/x"))
    assert Settings(home=tmp_path, system_data_dirs=()).data_dirs == (tmp_path / "datasets",)
    assert Settings(home=tmp_path).system_data_dirs == (Path("/usr/share/datasets"),)


def test_the_catalog_searches_only_the_directories_it_is_given(tmp_path: Path) -> None:
    system = tmp_path / "system"
    shutil.copytree(TEST_DATASETS / "fashion-mnist", system / "fashion-mnist")
    alone = Settings(home=tmp_path, system_data_dirs=())
    with_system = Settings(home=tmp_path, system_data_dirs=(system,))
    assert find_idx_files("fashion_mnist", alone.data_dirs) is None
    found = find_idx_files("fashion_mnist", with_system.data_dirs)
    assert found is not None and all(p.is_relative_to(system) for p in found.values())
