"""`report.md`: the study's table and, in words, which method wins at which size.

"Wins at a size" is read off the Pareto front: walking from the smallest model up, each
arm on the front is the most accurate one at its size or below; the report names those
arms, their methods and the margin over the best arm of every other method at that size.
A margin is only a win when it is real: a rival within a few dozen parameters of the
winner's size counts as the same size, and an accuracy gap within one standard deviation
(the larger of the two arms' spread over seeds) is a tie, and is written as one.

The report also states the comparison the `best-small-model` preset exists for: Discovering
Neural Wirings against the random graph with the same edges (section 3.3 of the paper), per
density. Budgets are shown as spent: steps asked against steps given (whole epochs), and the
samples each arm read (grow's statistics passes included) against the budget in samples.
"""

from __future__ import annotations

from archsearch.schemas.studies import ArmSummary, Stat, StudyDetail

# Two sizes closer than this are the same size ("a few dozen parameters", or 2%).
SAME_SIZE_PARAMETERS = 50
SAME_SIZE_FRACTION = 0.02


def _fmt(value: Stat | None, digits: int = 4, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    if value.n > 1:
        return f"{value.mean * scale:.{digits}g} ± {value.std * scale:.2g}"
    return f"{value.mean * scale:.{digits}g}"


def _budget_cell(limit: int | None, over: bool) -> str:
    return f"{limit if limit is not None else '-'}{' (OVER)' if over else ''}"


def table_markdown(arms: list[ArmSummary]) -> str:
    head = (
        "| arm | method | jobs ok | test accuracy | parameters | MACs | compact bytes "
        "| latency ms | steps spent | steps asked | samples seen | samples budget "
        "| wall clock s | front |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for arm in arms:
        rows.append(
            f"| {arm.label} | {arm.method} | {arm.counts.get('succeeded', 0)}/{arm.jobs} "
            f"| {_fmt(arm.test_accuracy)} | {_fmt(arm.parameters, 5)} | {_fmt(arm.macs, 5)} "
            f"| {_fmt(arm.compact_bytes, 5)} | {_fmt(arm.latency_ms, 3)} "
            f"| {_fmt(arm.optimizer_steps, 6)} | {_budget_cell(arm.budget_steps, arm.over_budget)} "
            f"| {_fmt(arm.samples_seen, 7)} "
            f"| {_budget_cell(arm.budget_samples, arm.over_samples)} "
            f"| {_fmt(arm.wall_clock_s, 3)} | {'*' if arm.on_front else ''} |"
        )
    return head + "\n".join(rows) + "\n"


def same_size_limit(parameters: float) -> float:
    """The largest size that still counts as `parameters`' size."""
    return parameters + max(SAME_SIZE_PARAMETERS, SAME_SIZE_FRACTION * parameters)


def is_tie(a: ArmSummary, b: ArmSummary) -> bool:
    """Accuracies within one standard deviation (the larger spread of the two)."""
    assert a.test_accuracy is not None and b.test_accuracy is not None
    spread = max(a.test_accuracy.std, b.test_accuracy.std)
    return abs(a.test_accuracy.mean - b.test_accuracy.mean) <= spread


def _scored(arms: list[ArmSummary]) -> list[ArmSummary]:
    return [a for a in arms if a.parameters is not None and a.test_accuracy is not None]


def _accuracy(arm: ArmSummary) -> float:
    assert arm.test_accuracy is not None
    return arm.test_accuracy.mean


def _size(arm: ArmSummary) -> float:
    assert arm.parameters is not None
    return arm.parameters.mean


def best_rivals(arms: list[ArmSummary], winner: ArmSummary) -> dict[str, ArmSummary | None]:
    """Per other method, its most accurate arm at the winner's size or smaller (sizes within
    a few dozen parameters count as the same size); None when it has no arm that small."""
    limit = same_size_limit(_size(winner))
    out: dict[str, ArmSummary | None] = {}
    for method in sorted({a.method for a in arms} - {winner.method}):
        rivals = [a for a in _scored(arms) if a.method == method and _size(a) <= limit]
        out[method] = max(rivals, key=_accuracy) if rivals else None
    return out


def _rival_phrase(method: str, rival: ArmSummary | None, winner: ArmSummary) -> str:
    if rival is None:
        return f"{method}: no arm this small"
    gap = (_accuracy(winner) - _accuracy(rival)) * 100
    if is_tie(winner, rival):
        return f"{method} ({rival.label}) tied ({gap:+.1f} points, within one std)"
    if gap < 0:
        return f"{method} ({rival.label}, {_size(rival):,.0f} parameters) {-gap:.1f} points ahead"
    return f"{method} ({rival.label}) {gap:.1f} points behind"


def verdict(winner: ArmSummary, rivals: list[ArmSummary]) -> str:
    """'wins', 'ties with ...' or 'is beaten at the same size by ...'."""
    ties = [r.label for r in rivals if is_tie(winner, r)]
    ahead = [r.label for r in rivals if not is_tie(winner, r) and _accuracy(r) > _accuracy(winner)]
    if ahead:
        return "is beaten at the same size by " + ", ".join(ahead)
    return "ties with " + ", ".join(ties) if ties else "wins"


def winner_line(arms: list[ArmSummary], winner: ArmSummary) -> str:
    rivals = best_rivals(arms, winner)
    present = [r for r in rivals.values() if r is not None]
    others = "; ".join(_rival_phrase(m, r, winner) for m, r in rivals.items())
    return (
        f"- up to {_size(winner):,.0f} parameters: **{winner.label}** ({winner.method}) "
        f"{verdict(winner, present)}, test accuracy {_fmt(winner.test_accuracy)}. "
        f"Others at this size (within a few dozen parameters) or smaller: {others}."
    )


def winners_markdown(detail: StudyDetail) -> str:
    by_label = {arm.label: arm for arm in detail.arms}
    lines = [winner_line(detail.arms, by_label[point.label]) for point in detail.pareto]
    over = [arm.label for arm in detail.arms if arm.over_budget]
    if over:
        lines.append(f"- over budget (spent more steps than allowed): {', '.join(over)}")
    read_more = [arm.label for arm in detail.arms if arm.over_samples]
    if read_more:
        lines.append(
            "- read more samples than the budget's steps hold (grow's statistics passes "
            f"take no optimiser step but read data): {', '.join(read_more)}"
        )
    return "\n".join(lines) or "- no arm has finished yet"


def _density_suffix(label: str, prefix: str) -> str | None:
    return label[len(prefix) :] if label.startswith(prefix) else None


def wiring_comparison(arms: list[ArmSummary]) -> str:
    """DNW against the random graph with the same edges, density by density."""
    scored = {a.label: a for a in _scored(arms)}
    lines = []
    for label, dnw in scored.items():
        suffix = _density_suffix(label, "search-")
        rival = scored.get(f"random_graph-{suffix}") if suffix else None
        if dnw.method != "search" or rival is None:
            continue
        gap = (_accuracy(dnw) - _accuracy(rival)) * 100
        outcome = "DNW ahead" if gap > 0 else "random graph ahead"
        lines.append(
            f"- {suffix}: DNW {_fmt(dnw.test_accuracy)} vs random graph "
            f"{_fmt(rival.test_accuracy)} ({_size(dnw):,.0f} vs {_size(rival):,.0f} "
            f"parameters): {gap:+.1f} points, "
            f"{'a tie (within one std)' if is_tie(dnw, rival) else outcome}"
        )
    return "\n".join(lines) or "- no DNW and random-graph arms at the same density"


def budget_sentence(detail: StudyDetail) -> str:
    """The steps asked and, from the arms' own counts, the steps actually given."""
    asked = (detail.budget or {}).get("steps")
    if asked is None:
        return "no step budget (each arm trains as its spec says)"
    spent = [a.optimizer_steps.mean for a in detail.arms if a.optimizer_steps is not None]
    if not spent:
        return f"budget {asked} optimizer steps asked an arm (none spent yet)"
    low, high = min(spent), max(spent)
    given = f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}"
    return (
        f"budget {asked} optimizer steps asked an arm; given {given} (whole epochs, never "
        "more; column 'steps spent')"
    )


def report_markdown(detail: StudyDetail) -> str:
    return (
        f"# Study {detail.name}\n\n"
        f"Dataset `{detail.dataset}`, {budget_sentence(detail)}, "
        f"seeds {detail.seeds}; status {detail.status}, jobs {detail.counts}.\n\n"
        "## Who wins at which size (the Pareto front of accuracy against parameters)\n\n"
        f"{winners_markdown(detail)}\n\n"
        "## Discovering Neural Wirings against the random graph with the same edges\n\n"
        f"{wiring_comparison(detail.arms)}\n\n"
        "## All arms (mean ± std over seeds)\n\n"
        f"{table_markdown(detail.arms)}"
    )
