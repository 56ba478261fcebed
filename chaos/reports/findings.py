"""A run's findings grouped by rule: what the report's summary lists first.

A broken backend can give hundreds of anomalies of a handful of kinds; a
person needs the kinds, how many of each, and one instance to read. A rule is
one ``(checker, anomaly type)``; its count is the checker's own total for
that type (``stats.anomalies_by_type``) when it kept one, else the anomalies
it listed. The instance shown first is the minimal one: the fewest ops
(ties: the first found), the easiest to follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Rule:
    checker: str
    type: str
    count: int
    instances: list = field(default_factory=list)   # the listed anomalies, the minimal one first

    @property
    def anchor(self) -> str:
        return "finding-" + "".join(c if c.isalnum() else "-" for c in f"{self.checker}-{self.type}")


def _ops(a: dict) -> int:
    ops = a.get("ops")
    return len(ops) if isinstance(ops, list) and ops else 10**6   # an anomaly citing no op is no easier


def group(checkers: dict) -> list[Rule]:
    """The rules broken, in checker order, then in order of first appearance."""
    rules: list[Rule] = []
    for name, r in checkers.items():
        if not isinstance(r, dict):
            continue
        listed = [a for a in (r.get("anomalies") or []) if isinstance(a, dict)]
        by_type: dict[str, list] = {}
        for a in listed:
            by_type.setdefault(str(a.get("type", "anomaly")), []).append(a)
        totals = (r.get("stats") or {}).get("anomalies_by_type") if isinstance(r.get("stats"), dict) else None
        totals = totals if isinstance(totals, dict) else {}
        for typ, items in by_type.items():
            minimal = min(range(len(items)), key=lambda k: (_ops(items[k]), k))
            ordered = [items[minimal]] + items[:minimal] + items[minimal + 1:]
            count = totals.get(typ)
            rules.append(Rule(name, typ, count if isinstance(count, int) and count >= len(items) else len(items),
                              ordered))
        for typ, n in totals.items():   # counted by the checker, none of them listed (capped)
            if typ not in by_type and isinstance(n, int) and n > 0:
                rules.append(Rule(name, str(typ), n, []))
    return rules
