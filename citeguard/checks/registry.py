"""The registered axes, in the order the verdict reports them.

Adding an axis: write its module with a class that satisfies :class:`~citeguard.checks.base.Check`
and add one line to :data:`CHECKS`. The Guard builds each check once, from its policy.
"""

from __future__ import annotations

from citeguard.checks.base import Check
from citeguard.checks.diversity import DiversityCheck
from citeguard.checks.freshness import FreshnessCheck
from citeguard.checks.query import QueryCheck
from citeguard.checks.validity import ValidityCheck
from citeguard.policy import Policy

#: the check classes, in verdict order; each is built from the Guard's policy
CHECKS: tuple[type[Check], ...] = (
    ValidityCheck,
    DiversityCheck,
    FreshnessCheck,
    QueryCheck,
)

#: the built-in axis names, in verdict order
AXES: tuple[str, ...] = tuple(c.name for c in CHECKS)


def build_checks(policy: Policy) -> tuple[Check, ...]:
    """One instance of every registered check, for one Guard."""
    return tuple(factory(policy) for factory in CHECKS)


__all__ = ["AXES", "CHECKS", "build_checks"]
