"""Runs-table columns named by the user: any field of a job's spec
(`spec.training.optimizer.lr`) or any of its latest metrics (`metrics.test_accuracy`), as
SQL keys to sort and filter on and as values to show, as MLflow's runs table offers
`params.*` and `metrics.*`.

A spec field holds a number, a string, a boolean or nothing, so a key is the pair
(numeric value, text): numbers order by value, then the other values by their text, and a
job without the field last in both directions; filters compare numbers as numbers.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Float, String, case, cast, func, literal
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from archsearch.core.errors import UserError
from archsearch.jobs.domain.tables import Job

# A metric name as a job reports it; a spec path as dotted field names (list items by index).
_KEY = re.compile(r"^(?:metrics\.([A-Za-z0-9_/-]{1,100})|spec\.(\w{1,60}(?:\.\w{1,60}){0,7}))$")
_WHERE = re.compile(r"^([\w./-]+?)\s*(>=|<=|!=|=|>|<)\s*(.+)$")
_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    "=": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
# Beyond every real value: a field that is not a number, then a job without the field.
_OTHER, _MISSING = 1e299, 1e300
MAX_COLUMNS, MAX_CONDITIONS = 20, 10


class InvalidColumn(UserError):
    """A column, sort or filter the runs table cannot read; `field` names the parameter."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class FieldKey:
    """`metrics.<name>` or `spec.<dotted path>`: where in a job the value lives."""

    source: str  # "metrics" or "spec"
    path: tuple[str | int, ...]

    @property
    def name(self) -> str:
        return ".".join([self.source, *map(str, self.path)])


@dataclass(frozen=True)
class Condition:
    """A filter such as `metrics.test_accuracy>0.9`: a number compares as a number, text
    only for (in)equality."""

    key: FieldKey
    op: str
    value: float | str


def parse_key(text: str, field: str = "query.col") -> FieldKey:
    match = _KEY.match(text.strip())
    if match is None:
        raise InvalidColumn(
            f"{text!r} is not a column: name a metric as metrics.<name> (e.g. "
            "metrics.test_accuracy) or a spec field as spec.<path> (e.g. "
            "spec.training.optimizer.lr)",
            field,
        )
    metric, spec_path = match.groups()
    if metric is not None:
        return FieldKey("metrics", (metric,))
    return FieldKey("spec", tuple(int(p) if p.isdigit() else p for p in spec_path.split(".")))


def parse_keys(texts: Sequence[str]) -> list[FieldKey]:
    if len(texts) > MAX_COLUMNS:
        raise InvalidColumn(f"at most {MAX_COLUMNS} columns, not {len(texts)}", "query.col")
    return list(dict.fromkeys(parse_key(t) for t in texts))


def parse_condition(text: str) -> Condition:
    match = _WHERE.match(text.strip()) if len(text) <= 300 else None
    if match is None:
        raise InvalidColumn(
            f"{text!r} is not a filter: write <column><op><value>, e.g. "
            "metrics.test_accuracy>0.9, with op one of >= <= != = > <",
            "query.where",
        )
    name, op, raw = match.groups()
    key = parse_key(name, "query.where")
    value: float | str
    try:
        value = float(raw)
    except ValueError:
        value = raw.strip().strip("'\"")
        if op not in ("=", "!="):
            raise InvalidColumn(
                f"{text!r} compares {name} with {value!r}, not a number: only = and != take text",
                "query.where",
            ) from None
    return Condition(key, op, value)


def parse_conditions(texts: Sequence[str]) -> list[Condition]:
    if len(texts) > MAX_CONDITIONS:
        raise InvalidColumn(f"at most {MAX_CONDITIONS} filters, not {len(texts)}", "query.where")
    return [parse_condition(t) for t in texts]


@dataclass(frozen=True)
class _Sql:
    kind: ColumnElement[Any]  # the JSON type, NULL when the field is absent
    number: ColumnElement[Any]  # the value when it is a number, else NULL
    text: ColumnElement[Any]  # the value as text


def _sql(session: Session, key: FieldKey) -> _Sql:
    column = Job.latest_metrics if key.source == "metrics" else Job.spec
    if session.get_bind().dialect.name == "postgresql":
        text = column[key.path].as_string()
        kind = func.json_typeof(column[key.path])
        return _Sql(kind, case((kind == "number", cast(text, Float))), text)
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{p}"' for p in key.path)
    value = func.json_extract(column, literal(path))
    kind = func.json_type(column, literal(path))
    return _Sql(kind, case((kind.in_(("integer", "real")), cast(value, Float))), value)


def _metric(key: FieldKey) -> ColumnElement[Any]:
    # The metrics column holds finite numbers only (`repository.finite_only`): one cast.
    value: ColumnElement[Any] = Job.latest_metrics[str(key.path[0])].as_float()
    return value


def sort_keys(session: Session, key: FieldKey, descending: bool) -> list[ColumnElement[Any]]:
    """The keys that order the jobs by `key`, a job without it last: the value of a metric;
    (number, text) of a spec field. Each reads the JSON as few times as it can: at 10,000
    jobs the parsing of the JSON text is most of the query's time."""
    sign = -1.0 if descending else 1.0
    if key.source == "metrics":
        return [func.coalesce(_metric(key), sign * _MISSING)]
    sql = _sql(session, key)
    number = case(
        {t: cast(sql.text, Float) for t in ("number", "integer", "real")}
        | {"null": literal(sign * _MISSING)},
        value=func.coalesce(sql.kind, "null"),
        else_=literal(sign * _OTHER),
    )
    return [number, func.coalesce(cast(sql.text, String), "")]


def condition_clause(session: Session, condition: Condition) -> ColumnElement[bool]:
    compare = _OPERATORS[condition.op]
    if isinstance(condition.value, float):
        metric = condition.key.source == "metrics"
        number = _metric(condition.key) if metric else _sql(session, condition.key).number
        clause: ColumnElement[bool] = compare(number, condition.value)
        return clause
    sql = _sql(session, condition.key)
    text_clause: ColumnElement[bool] = compare(cast(sql.text, String), condition.value)
    return text_clause & sql.number.is_(None)


def value_of(metrics: dict[str, Any], spec: dict[str, Any], key: FieldKey) -> Any:
    """The value a column shows for a job (None where the job has no such field)."""
    node: Any = metrics if key.source == "metrics" else spec
    for part in key.path:
        if isinstance(node, dict):
            node = node.get(str(part))
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node
