"""`report.md`: the study's table and, in words, which method wins at which size.

"Wins at a size" is read off the Pareto front: walking from the smallest model up, each
arm on the front is the most accurate one at its size or below. Each front arm is then
compared with every other arm, of any method, of comparable size (parameters at most
COMPARABLE_SIZE_FRACTION above its own) or smaller. It is called the winner only when its mean
test accuracy beats every one of them by more than one standard deviation over seeds (the
larger of the two arms' standard deviations); a gap within that is a tie, and an arm with
one seed gets no verdict, since one seed has no spread to measure a gap against.

The report also states the comparison the `best-small-model` preset exists for: Discovering
Neural Wirings against the random graph with the same edges (section 3.3 of the paper), per
density. Budgets are shown as spent: steps asked against steps given (whole epochs), and the
samples each arm read (grow's statistics passes included) against the budget in samples.
"""

from __future__ import annotations

from archsearch.schemas.studies import ArmSummary, Stat, StudyDetail

# An arm up to 5% larger than another is of comparable size: arms built for one target size
# land a few percent apart (the preset's DNW and magnitude graphs at one density differ by
# their biases, 0.4%; grow stops below its parameter target; unit pruning rounds to whole
# neurons), and a verdict between them must be about accuracy, not about a size difference
# no deployment would notice.
COMPARABLE_SIZE_FRACTION = 0.05
NO_VERDICT = "no verdict from one seed"
# The table's latency column: what the jobs measured (core/deploy/latency.py).
LATENCY_HEADER = "latency ms (CPU time per call, 1 thread)"


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
        "| arm | method | jobs ok | test accuracy | validation accuracy | parameters | MACs "
        "| compact bytes "
        f"| {LATENCY_HEADER} | steps spent | steps asked | samples seen | samples budget "
        "| wall clock s | front | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for arm in arms:
        rows.append(
            f"| {arm.label} | {arm.method} | {arm.counts.get('succeeded', 0)}/{arm.jobs} "
            f"| {_fmt(arm.test_accuracy)} | {_fmt(arm.val_accuracy)} "
            f"| {_fmt(arm.parameters, 5)} | {_fmt(arm.macs, 5)} "
            f"| {_fmt(arm.compact_bytes, 5)} | {_fmt(arm.latency_ms, 3)} "
            f"| {_fmt(arm.optimizer_steps, 6)} | {_budget_cell(arm.budget_steps, arm.over_budget)} "
            f"| {_fmt(arm.samples_seen, 7)} "
            f"| {_budget_cell(arm.budget_samples, arm.over_samples)} "
            f"| {_fmt(arm.wall_clock_s, 3)} | {'*' if arm.on_front else ''} "
            f"| {_verdict_cell(arms, arm)} |"
        )
    return head + "\n".join(rows) + "\n"


def _verdict_cell(arms: list[ArmSummary], arm: ArmSummary) -> str:
    """A front arm's verdict in one word or two (see `judgement`); blank off the front."""
    if not arm.on_front or arm.test_accuracy is None or arm.parameters is None:
        return ""
    return judgement(arm, comparable_rivals(arms, arm))[0]


def comparable_limit(parameters: float) -> float:
    """The largest size still comparable with `parameters` (COMPARABLE_SIZE_FRACTION above)."""
    return parameters * (1 + COMPARABLE_SIZE_FRACTION)


def one_seed(a: ArmSummary, b: ArmSummary) -> bool:
    """Either arm has a single seed: no spread, so no gap between them can be judged."""
    assert a.test_accuracy is not None and b.test_accuracy is not None
    return a.test_accuracy.n < 2 or b.test_accuracy.n < 2


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


def comparable_rivals(arms: list[ArmSummary], winner: ArmSummary) -> list[ArmSummary]:
    """Every other scored arm, of any method, of comparable size or smaller."""
    limit = comparable_limit(_size(winner))
    return [a for a in _scored(arms) if a.label != winner.label and _size(a) <= limit]


def best_rivals(arms: list[ArmSummary], winner: ArmSummary) -> dict[str, ArmSummary | None]:
    """Per method (the winner's own included), its most accurate arm among the comparable
    rivals; None when it has no arm that small."""
    rivals = comparable_rivals(arms, winner)
    out: dict[str, ArmSummary | None] = {}
    for method in sorted({a.method for a in arms}):
        of_method = [a for a in rivals if a.method == method]
        if of_method or method != winner.method:
            out[method] = max(of_method, key=_accuracy) if of_method else None
    return out


def _rival_phrase(method: str, rival: ArmSummary | None, winner: ArmSummary) -> str:
    if rival is None:
        return f"{method}: no arm this small"
    gap = (_accuracy(winner) - _accuracy(rival)) * 100
    if one_seed(winner, rival):
        side = "ahead" if gap < 0 else "behind"
        return (
            f"{method} ({rival.label}, {_size(rival):,.0f} parameters) {abs(gap):.1f} points "
            f"{side}, {NO_VERDICT}"
        )
    if is_tie(winner, rival):
        return f"{method} ({rival.label}) tied ({gap:+.1f} points, within one std)"
    if gap < 0:
        return f"{method} ({rival.label}, {_size(rival):,.0f} parameters) {-gap:.1f} points ahead"
    return f"{method} ({rival.label}) {gap:.1f} points behind"


def judgement(winner: ArmSummary, rivals: list[ArmSummary]) -> tuple[str, list[str]]:
    """The verdict's kind ('beaten', 'one seed', 'tie', 'wins' or 'alone') and the arms
    deciding it: a rival ahead by more than one std beats the winner even when other rivals
    have one seed; a winner with one seed wins nothing, even with no rival this small."""
    judged = [r for r in rivals if not one_seed(winner, r)]
    ahead = [r.label for r in judged if not is_tie(winner, r) and _accuracy(r) > _accuracy(winner)]
    unjudged = [r.label for r in rivals if one_seed(winner, r)]
    ties = [r.label for r in judged if is_tie(winner, r)]
    if ahead:
        return "beaten", ahead
    assert winner.test_accuracy is not None
    if unjudged or winner.test_accuracy.n < 2:
        return "one seed", unjudged
    if ties:
        return "tie", ties
    return ("wins", []) if rivals else ("alone", [])


VERDICT_PHRASES = {
    "beaten": "is beaten at comparable size by {}",
    "one seed": "has " + NO_VERDICT,
    "tie": "ties with {}",
    "wins": "wins",
    "alone": "is the only arm this small",
}


def verdict(winner: ArmSummary, rivals: list[ArmSummary]) -> str:
    """'wins', 'ties with ...', 'is beaten at comparable size by ...', no verdict (one seed)
    or the only arm this small."""
    kind, labels = judgement(winner, rivals)
    said = VERDICT_PHRASES[kind].format(", ".join(labels))
    return f"{said} (against {', '.join(labels)})" if kind == "one seed" and labels else said


def winner_line(arms: list[ArmSummary], winner: ArmSummary) -> str:
    rivals = best_rivals(arms, winner)
    others = "; ".join(_rival_phrase(m, r, winner) for m, r in rivals.items())
    return (
        f"- up to {_size(winner):,.0f} parameters: **{winner.label}** ({winner.method}) "
        f"{verdict(winner, comparable_rivals(arms, winner))}, test accuracy "
        f"{_fmt(winner.test_accuracy)}. Best arm of each method at comparable size "
        f"(parameters within {COMPARABLE_SIZE_FRACTION:.0%}) or smaller: {others or 'none'}."
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


def _pair_outcome(dnw: ArmSummary, rival: ArmSummary, gap: float) -> str:
    if one_seed(dnw, rival):
        return NO_VERDICT
    if is_tie(dnw, rival):
        return "a tie (within one std)"
    return "DNW ahead" if gap > 0 else "random graph ahead"


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
        lines.append(
            f"- {suffix}: DNW {_fmt(dnw.test_accuracy)} vs random graph "
            f"{_fmt(rival.test_accuracy)} ({_size(dnw):,.0f} vs {_size(rival):,.0f} "
            f"parameters): {gap:+.1f} points, {_pair_outcome(dnw, rival, gap)}"
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


VERDICT_RULE = (
    "An arm wins only when its mean test accuracy beats every arm, of any method, of "
    f"comparable size (at most {COMPARABLE_SIZE_FRACTION:.0%} more parameters) or smaller by "
    "more than one standard deviation over seeds (the larger of the two arms'); a smaller gap "
    "is a tie, and an arm with one seed gets no verdict."
)


def selection_sentence(detail: StudyDetail) -> str:
    """What chose the front: the validation rows when every ranked arm has them."""
    if detail.pareto and all(point.val_accuracy is not None for point in detail.pareto):
        return (
            "The front is chosen on validation accuracy (training rows every trial held apart, "
            "the same rows for each); every accuracy shown beside it is test accuracy, which "
            "chose nothing. "
        )
    return "The front is chosen on test accuracy (this study's jobs held no rows apart). "


def pruning_sentence(detail: StudyDetail) -> str:
    """Which pruner stopped how many trials, and what the study spent in all."""
    pruner = (detail.config.get("pruner") or {}).get("name", "none")
    spent = (
        f"{detail.optimizer_steps_spent:,} optimizer steps and {detail.device_seconds:,.0f} "
        "job-seconds spent in all"
    )
    if pruner == "none":
        return f"No pruner; {spent}."
    pruned = detail.counts.get("pruned", 0)
    return (
        f"Pruner `{pruner}` stopped {pruned} job(s) early or before they started (status "
        "`pruned`: counted as spent; an arm is judged by its first seed, and its other seeds "
        f"stop with it; a stopped arm is never on the front); {spent}."
    )


def tuning_sentence(detail: StudyDetail) -> str:
    """Which training knobs the arms swept, and that every arm leaving one unset ran at
    each of its values (studies/expansion.py), so no arm is compared untuned."""
    tuned = detail.config.get("equal_tuning") or {}
    if not tuned:
        return ""
    knobs = "; ".join(f"`{path}` over {values}" for path, values in tuned.items())
    return (
        f" Equal tuning: the arms sweep {knobs}; every arm that does not set a swept knob ran "
        "at each of its values too (labels `<arm>,<knob>=<value>`)."
    )


def report_markdown(detail: StudyDetail) -> str:
    return (
        f"# Study {detail.name}\n\n"
        f"Dataset `{detail.dataset}`, {budget_sentence(detail)}, "
        f"seeds {detail.seeds}; status {detail.status}, jobs {detail.counts}. "
        f"{pruning_sentence(detail)}{tuning_sentence(detail)}\n\n"
        "## Who wins at which size (the Pareto front of accuracy against parameters)\n\n"
        f"{selection_sentence(detail)}{VERDICT_RULE}\n\n"
        f"{winners_markdown(detail)}\n\n"
        "## Discovering Neural Wirings against the random graph with the same edges\n\n"
        f"{wiring_comparison(detail.arms)}\n\n"
        "## All arms (mean ± std over seeds)\n\n"
        f"{table_markdown(detail.arms)}"
    )
