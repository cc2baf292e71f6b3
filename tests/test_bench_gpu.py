"""`bench/gpu.py`, the device check, on this CPU machine: its options (a GPU asked for where
there is none is refused in one line) and one parity row of its smoke mode. The whole
`--device cpu --quick` run takes minutes on a loaded 2-core machine: run it by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH / "gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gpu"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_quick_mode_is_a_small_cpu_run(gpu_check: ModuleType) -> None:
    opts = gpu_check.options(["--device", "cpu", "--quick"])
    assert (opts.device, opts.dataset, opts.parity_epochs, opts.slots) == (
        torch.device("cpu"),
        "digits",
        1,
        2,
    )
    assert opts.methods == ("train", "search", "prune", "grow")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_a_gpu_asked_for_where_there_is_none_is_refused(
    gpu_check: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.options([])
    assert exit_info.value.code == 2
    assert "--device cpu --quick" in capsys.readouterr().err


def test_an_unknown_method_is_named(
    gpu_check: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        gpu_check.options(["--device", "cpu", "--methods", "train,transfr"])
    assert "transfr" in capsys.readouterr().err


def test_a_parity_row_of_the_quick_run(gpu_check: ModuleType, tmp_path: Path) -> None:
    opts = gpu_check.options(["--device", "cpu", "--quick", "--methods", "train"])
    header, rule, row = gpu_check.parity(opts, tmp_path)  # digits needs no data folder
    assert header.startswith("| method |") and rule.startswith("|---")
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[0] == "train" and cells[1] == cells[2] and cells[4] == "yes"
    assert float(cells[1]) > 0.3  # one epoch on digits already learns something
