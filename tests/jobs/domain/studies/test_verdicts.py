"""A study's verdicts: every arm against every other, of any method, at comparable size.

The case of the tracker: on an equal-budget study the report said `magnitude-d0.1` wins at
15,263 parameters while the DNW arm (also method `search`) had 62 more parameters (0.4%) and
was 2.0 points more accurate; with one seed that cannot be a win, with three it is a loss.
"""

from __future__ import annotations

from archsearch.jobs.domain.studies.aggregation import JobFacts, summarise
from archsearch.jobs.domain.studies.report import (
    COMPARABLE_SIZE_FRACTION,
    report_markdown,
    table_markdown,
    winner_line,
)
from archsearch.schemas.studies import ArmSummary, Stat
from tests.jobs.domain.studies.test_report import detail

MAGNITUDE = ("magnitude-d0.1", 15_263, 0.900)
DNW = ("search-d0.1", 15_325, 0.920)


def arm(label: str, size: float, accuracy: float, std: float, seeds: int) -> ArmSummary:
    return ArmSummary(
        label=label,
        method="search",
        jobs=seeds,
        counts={"succeeded": seeds},
        test_accuracy=Stat(mean=accuracy, std=std, n=seeds),
        parameters=Stat(mean=size, std=0.0, n=seeds),
    )


def pair(std: float, seeds: int) -> tuple[ArmSummary, ArmSummary]:
    return arm(*MAGNITUDE, std, seeds), arm(*DNW, std, seeds)


def test_comparable_size_is_five_percent() -> None:
    assert COMPARABLE_SIZE_FRACTION == 0.05
    assert DNW[1] <= MAGNITUDE[1] * (1 + COMPARABLE_SIZE_FRACTION)


def test_one_seed_names_no_winner_and_shows_the_more_accurate_arm() -> None:
    magnitude, dnw = pair(std=0.0, seeds=1)
    line = winner_line([magnitude, dnw], magnitude)
    assert "**magnitude-d0.1** (search) has no verdict from one seed (against search-d0.1)" in line
    assert "wins" not in line
    assert "search (search-d0.1, 15,325 parameters) 2.0 points ahead, no verdict" in line


def test_three_seeds_the_same_method_arm_beats_it_at_comparable_size() -> None:
    magnitude, dnw = pair(std=0.005, seeds=3)  # 2.0 points apart, 0.5 point spread
    line = winner_line([magnitude, dnw], magnitude)
    assert "**magnitude-d0.1** (search) is beaten at comparable size by search-d0.1" in line
    assert "wins" not in line
    dnw_line = winner_line([magnitude, dnw], dnw)
    assert "**search-d0.1** (search) wins" in dnw_line


def test_an_arm_alone_at_its_size_wins_nothing_and_from_one_seed_says_so() -> None:
    magnitude, _ = pair(std=0.005, seeds=3)
    assert "**magnitude-d0.1** (search) is the only arm this small" in winner_line(
        [magnitude], magnitude
    )
    single, _ = pair(std=0.0, seeds=1)
    line = winner_line([single], single)
    assert "has no verdict from one seed," in line and "wins" not in line


def test_a_gap_within_one_std_over_seeds_is_a_tie() -> None:
    magnitude, dnw = pair(std=0.025, seeds=3)  # 2.0 points apart, 2.5 points of spread
    assert "ties with search-d0.1" in winner_line([magnitude, dnw], magnitude)
    assert "ties with magnitude-d0.1" in winner_line([magnitude, dnw], dnw)


def facts(label: str, size: float, accuracy: float, seed: int) -> JobFacts:
    metrics = {"test_accuracy": accuracy + 0.004 * (seed - 1), "parameters": size}
    return JobFacts(label, "search", "succeeded", metrics)


def test_the_report_text_and_table_call_no_winner_from_one_seed_and_the_real_one_from_three() -> (
    None
):
    for seeds, magnitude_cell, dnw_cell in ((1, "one seed", "one seed"), (3, "beaten", "wins")):
        jobs = [facts(*MAGNITUDE, s) for s in range(seeds)] + [facts(*DNW, s) for s in range(seeds)]
        arms, front = summarise(jobs, budget=None)
        text = report_markdown(detail(arms, [p.model_dump() for p in front]))
        assert "more than one standard deviation over seeds" in text
        table = table_markdown(arms)
        assert f"| * | {magnitude_cell} |" in table.splitlines()[2]
        assert f"| * | {dnw_cell} |" in table.splitlines()[3]
        assert "latency ms (CPU time per call, 1 thread)" in table
    assert "**magnitude-d0.1** (search) is beaten at comparable size by search-d0.1" in text
