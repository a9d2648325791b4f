"""An adapter's operators, declared once: which it can serve, which it serves
without an `operators` setting, and what `describe` says of them.

`OPERATORS` restates the service's operator table (`mmc_domain::operators`)
for the operators a Python adapter may serve; the conformance kit checks
each described slug and country against the service's own table.
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

from . import settings
from .types import AdapterError_NotSent, AdapterError_NotSupported, OperatorInfo, fail


@dataclass(frozen=True)
class Operator:
    slug: str
    name: str
    aliases: Tuple[str, ...]
    country: str
    min_amount: int = 100
    max_amount: int = 2_000_000

    @property
    def currency(self) -> str:
        # Benin, Togo and Côte d'Ivoire all use the West African CFA franc.
        return "XOF"


OPERATORS: Tuple[Operator, ...] = (
    Operator("mtn-bj", "MTN Mobile Money Bénin", ("mtn", "momo-bj"), "BJ"),
    Operator("moov-bj", "Moov Money Bénin", ("moov-money-bj", "flooz-bj"), "BJ"),
    Operator("celtiis-bj", "Celtiis Cash", ("celtiis",), "BJ"),
    Operator("togocom-tg", "Mixx by Yas (T-Money)", ("tmoney", "togocel", "yas"), "TG"),
    Operator("moov-tg", "Moov Money Togo (Flooz)", ("flooz",), "TG"),
    Operator("orange-ci", "Orange Money Côte d'Ivoire", ("orange",), "CI"),
    Operator("mtn-ci", "MTN MoMo Côte d'Ivoire", ("momo-ci",), "CI"),
    Operator("moov-ci", "Moov Money Côte d'Ivoire", ("moov-money-ci",), "CI"),
    Operator("wave-ci", "Wave Côte d'Ivoire", ("wave",), "CI"),
)


def find(slug: str) -> Optional[Operator]:
    return next((o for o in OPERATORS if o.slug == slug), None)


@dataclass(frozen=True)
class Market:
    """One served operator (a market of the provider), with its settings."""

    op: Operator

    @property
    def slug(self) -> str:
        return self.op.slug

    def setting(self, key: str) -> Optional[str]:
        return settings.setting(key, self.op.slug)

    def secret(self, key: str) -> str:
        return settings.required_secret(key, self.op.slug)

    def required(self, key: str) -> str:
        return settings.required_setting(key, self.op.slug)

    def base_url(self) -> str:
        url = self.setting("base_url")
        if url is None:
            raise fail(AdapterError_NotSent("base_url not configured"))
        return url.strip().rstrip("/")

    def timeout_ms(self) -> int:
        """`timeout_ms`, 0 (the host's default) when unset."""
        return settings.number("timeout_ms", 0, self.op.slug)


@dataclass(frozen=True)
class Spec:
    """What an adapter declares about its provider."""

    provider: str
    family: Tuple[str, ...]
    approval_window_ms: int
    status_per_second: int = 0
    modes: Tuple[str, ...] = ("direct", "hosted")

    def served(self) -> List[Operator]:
        wanted = settings.setting("operators")
        chosen = [s.strip() for s in wanted.split(",")] if wanted else None
        return [
            op
            for op in (find(slug) for slug in self.family)
            if op is not None and (chosen is None or op.slug in chosen)
        ]

    def market(self, operator: str) -> Market:
        """The served operator `operator`, or `not-supported` (nothing sent)."""
        for op in self.served():
            if op.slug == operator:
                return Market(op)
        raise fail(AdapterError_NotSupported(f"this adapter does not serve {operator}"))

    def info(self, op: Operator) -> OperatorInfo:
        return OperatorInfo(
            slug=op.slug,
            name=op.name,
            aliases=list(op.aliases),
            country=op.country,
            currency=op.currency,
            requires_otp=False,
            modes=list(self.modes),
            min_amount=op.min_amount,
            max_amount=op.max_amount,
            status="operational",
            approval_window_ms=settings.number(
                "approval_window_ms", self.approval_window_ms, op.slug),
            status_per_second=settings.number(
                "status_per_second", self.status_per_second, op.slug),
        )

    def describe(self) -> List[OperatorInfo]:
        return [self.info(op) for op in self.served()]
