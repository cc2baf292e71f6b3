"""`report.md`: the study's table and, in words, which method wins at which size.

"Wins at a size" is read off the Pareto front: walking from the smallest model up, each
arm on the front is the most accurate one at its size or below; the report names those
arms, their methods and the margin over the best arm of every other method at that size.
"""

from __future__ import annotations

from archsearch.schemas.studies import ArmSummary, Stat, StudyDetail


def _fmt(value: Stat | None, digits: int = 4, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    if value.n > 1:
        return f"{value.mean * scale:.{digits}g} ± {value.std * scale:.2g}"
    return f"{value.mean * scale:.{digits}g}"


def table_markdown(arms: list[ArmSummary]) -> str:
    head = (
        "| arm | method | jobs ok | test accuracy | parameters | MACs | compact bytes "
        "| latency ms | steps spent | budget | wall clock s | front |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for arm in arms:
        over = " (OVER)" if arm.over_budget else ""
        rows.append(
            f"| {arm.label} | {arm.method} | {arm.counts.get('succeeded', 0)}/{arm.jobs} "
            f"| {_fmt(arm.test_accuracy)} | {_fmt(arm.parameters, 5)} | {_fmt(arm.macs, 5)} "
            f"| {_fmt(arm.compact_bytes, 5)} | {_fmt(arm.latency_ms, 3)} "
            f"| {_fmt(arm.optimizer_steps, 6)} | {arm.budget_steps or '-'}{over} "
            f"| {_fmt(arm.wall_clock_s, 3)} | {'*' if arm.on_front else ''} |"
        )
    return head + "\n".join(rows) + "\n"


def best_other(arms: list[ArmSummary], winner: ArmSummary) -> list[str]:
    """For each other method, its best arm no larger than the winner, and the gap."""
    assert winner.parameters is not None and winner.test_accuracy is not None
    lines = []
    for method in sorted({a.method for a in arms} - {winner.method}):
        rivals = [
            a
            for a in arms
            if a.method == method
            and a.parameters is not None
            and a.test_accuracy is not None
            and a.parameters.mean <= winner.parameters.mean
        ]
        if rivals:
            best = max(rivals, key=lambda a: a.test_accuracy.mean)  # type: ignore[union-attr]
            gap = winner.test_accuracy.mean - best.test_accuracy.mean  # type: ignore[union-attr]
            lines.append(f"{method} ({best.label}) {gap * 100:.1f} points behind")
        else:
            lines.append(f"{method}: no arm this small")
    return lines


def winners_markdown(detail: StudyDetail) -> str:
    by_label = {arm.label: arm for arm in detail.arms}
    lines = []
    for point in detail.pareto:
        arm = by_label[point.label]
        others = "; ".join(best_other(detail.arms, arm))
        lines.append(
            f"- up to {point.parameters:,.0f} parameters: **{arm.label}** ({arm.method}), "
            f"test accuracy {point.test_accuracy:.4f}. Others at this size or smaller: {others}."
        )
    over = [arm.label for arm in detail.arms if arm.over_budget]
    if over:
        lines.append(f"- over budget (spent more steps than allowed): {', '.join(over)}")
    return "\n".join(lines) or "- no arm has finished yet"


def report_markdown(detail: StudyDetail) -> str:
    budget = detail.budget or {}
    return (
        f"# Study {detail.name}\n\n"
        f"Dataset `{detail.dataset}`, budget {budget.get('steps', 'none')} optimizer steps, "
        f"seeds {detail.seeds}; status {detail.status}, jobs {detail.counts}.\n\n"
        "## Who wins at which size (the Pareto front of accuracy against parameters)\n\n"
        f"{winners_markdown(detail)}\n\n"
        "## All arms (mean ± std over seeds)\n\n"
        f"{table_markdown(detail.arms)}"
    )
