"""The provider's books (`mmc:adapter/books`): Python adapters are built for
the `bookkeeping-adapter` world, as the Rust kit's are, so each exports a
`Books` class beside its `Operator`.

`NoBooks` says what a provider that publishes nothing says: no statement
(its operations are read back one by one by status) and no balance. An
adapter whose provider states a balance subclasses it and overrides
`balances`; one with nothing to say exports `Books = NoBooks`.
"""

from typing import Iterable, List, Optional

from wit_world.exports.books import Balance, BooksInfo, StatementPage

from .types import AdapterError_NotSupported, fail


class NoBooks:
    provider = "this provider"

    def info(self) -> BooksInfo:
        return BooksInfo(statement=False, final_after_ms=0, max_period_ms=0)

    def balances(self) -> List[Balance]:
        raise fail(AdapterError_NotSupported(f"{self.provider} publishes no balance"))

    def statement(self, from_ms: int, to_ms: int, cursor: Optional[str]) -> StatementPage:
        raise fail(AdapterError_NotSupported(f"{self.provider} publishes no statement"))


def balance(wallet: str, currency: str, available: str, reserved: Optional[str] = None,
            pays_out: Iterable[str] = ()) -> Balance:
    """A wallet as the provider states it: amounts in major units as written;
    `pays_out`, the operators whose payouts it pays (routing holds payouts
    back from a wallet that cannot cover them)."""
    return Balance(wallet=wallet, currency=currency, available=available,
                   reserved=reserved, pays_out=list(pays_out))
