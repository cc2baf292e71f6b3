"""report.md's words: ties are ties, the budget is the one spent, DNW against the random graph."""

from __future__ import annotations

from archsearch.jobs.domain.studies.aggregation import JobFacts, summarise
from archsearch.jobs.domain.studies.report import report_markdown, winner_line
from archsearch.schemas.studies import ArmSummary, Stat, StudyDetail


def arm(label: str, method: str, accuracy: float, std: float, size: float) -> ArmSummary:
    return ArmSummary(
        label=label,
        method=method,
        jobs=3,
        counts={"succeeded": 3},
        test_accuracy=Stat(mean=accuracy, std=std, n=3),
        parameters=Stat(mean=size, std=0.0, n=3),
    )


def test_a_gap_within_one_std_is_a_tie_and_a_real_gap_a_win() -> None:
    grow = arm("grow-p10250", "grow", 0.920, 0.010, 10_240)
    prune = arm("prune-d0.05", "prune", 0.912, 0.004, 10_250)  # 0.8 points: within 1 std
    search = arm("search-d0.05", "search", 0.870, 0.005, 9_000)
    line = winner_line([grow, prune, search], grow)
    assert "ties with prune-d0.05" in line and "wins" not in line
    assert "search (search-d0.05) 5.0 points behind" in line
    clear = arm("grow-p10250", "grow", 0.950, 0.002, 10_240)
    assert "**grow-p10250** (grow) wins" in winner_line([clear, prune, search], clear)


def test_a_rival_a_few_dozen_parameters_larger_is_of_comparable_size() -> None:
    small = arm("grow-p10250", "grow", 0.900, 0.002, 10_200)
    rival = arm("prune-d0.05", "prune", 0.930, 0.002, 10_240)  # 40 parameters larger
    line = winner_line([small, rival], small)
    assert "is beaten at comparable size by prune-d0.05" in line
    far = arm("prune-d0.5", "prune", 0.930, 0.002, 12_000)
    assert "prune: no arm this small" in winner_line([small, far], small)


def detail(arms: list[ArmSummary], pareto: list[dict]) -> StudyDetail:
    return StudyDetail.model_validate(
        {
            "id": "00000000-0000-0000-0000-000000000001",
            "name": "s",
            "status": "finished",
            "dataset": {"name": "mnist"},
            "budget": {"steps": 150},
            "seeds": [0, 1],
            "sampler": None,
            "n_trials": None,
            "parallel": None,
            "trials_asked": 0,
            "cancel_requested": False,
            "owner_id": None,
            "team_id": None,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "finished_at": None,
            "counts": {"succeeded": 4},
            "config": {},
            "arms": [a.model_dump() for a in arms],
            "pareto": pareto,
            "artifacts": [],
        }
    )


def facts(label: str, method: str, accuracy: float, steps: int, samples: int) -> JobFacts:
    metrics = {
        "test_accuracy": accuracy,
        "parameters": 1000.0,
        "optimizer_steps": float(steps),
        "samples_seen": float(samples),
    }
    return JobFacts(label, method, "succeeded", metrics, batch_size=128)


def test_report_shows_steps_given_samples_read_and_dnw_against_random() -> None:
    jobs = [
        facts("search-d0.05", "search", 0.90, 126, 126 * 128),
        facts("random_graph-d0.05", "search", 0.85, 126, 126 * 128),
        # Statistics passes: 76% more samples than its 126 training steps.
        facts("grow-p1000", "grow", 0.91, 126, int(1.76 * 126 * 128)),
    ]
    arms, front = summarise(jobs, budget=150)
    grow = next(a for a in arms if a.label == "grow-p1000")
    assert grow.budget_samples == 150 * 128 and grow.over_samples and not grow.over_budget
    text = report_markdown(detail(arms, [p.model_dump() for p in front]))
    assert "budget 150 optimizer steps asked an arm; given 126 (whole epochs" in text
    assert "budget 150 optimizer steps," not in text
    assert "read more samples than the budget's steps hold" in text and "grow-p1000" in text
    # One seed per arm: the gap is shown, no side is called the better.
    assert "- d0.05: DNW 0.9 vs random graph 0.85" in text
    assert "+5.0 points, no verdict from one seed" in text and "DNW ahead" not in text
    assert "| 28385 | 19200 (OVER) |" in text  # samples seen, samples budget


def test_report_says_what_chose_the_front() -> None:
    held_apart = [
        JobFacts(
            "a",
            "train",
            "succeeded",
            {"test_accuracy": 0.9, "val_accuracy": 0.8, "parameters": 10.0},
        ),
        JobFacts(
            "b",
            "train",
            "succeeded",
            {"test_accuracy": 0.7, "val_accuracy": 0.9, "parameters": 10.0},
        ),
    ]
    arms, front = summarise(held_apart, budget=None)
    text = report_markdown(detail(arms, [p.model_dump() for p in front]))
    assert "The front is chosen on validation accuracy" in text
    assert "| b | train | 1/1 | 0.7 | 0.9 |" in text  # test, then validation accuracy
    older = [JobFacts("a", "train", "succeeded", {"test_accuracy": 0.9, "parameters": 10.0})]
    arms, front = summarise(older, budget=None)
    text = report_markdown(detail(arms, [p.model_dump() for p in front]))
    assert "The front is chosen on test accuracy (this study's jobs held no rows apart)" in text
