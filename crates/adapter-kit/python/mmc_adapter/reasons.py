"""A provider's failure codes, declared once as a table, as the Rust kit's
`reasons` declares them: each of its codes -> ours, worded for people by the
provider's own message, else by ours. A code the table does not name (one
the provider adds later) is `operator_error`, its code kept in the message:
nothing unknown is ever taken for the customer's doing.
"""

from typing import Dict, Optional

from mmc_adapter.types import Failure, failure

# Ours for a failure whose cause we cannot tell.
OPERATOR_ERROR = "operator_error"

# Our words for our codes, for a provider that gives no message of its own,
# the same as the Rust kit's `OUR_WORDS` (its tests hold the two together).
OUR_WORDS: Dict[str, str] = {
    "declined_by_customer": "The customer declined the payment.",
    "approval_expired": "The customer did not approve in time.",
    "insufficient_funds": "The customer's balance is too low.",
    "payer_not_found": "No mobile money account for this number.",
    "recipient_not_found": "No mobile money account for the recipient's number.",
    "limit_reached": "The account's transaction limit is reached.",
    "recipient_not_allowed": "The recipient's account may not receive this payment.",
    "account_blocked": "The customer's mobile money account is not active.",
    "phone_invalid": "The phone number is not valid for this operator.",
    "cancelled": "The operation was cancelled at the operator.",
}


class Reasons:
    """What a provider's failure codes mean. `table` has one line per code of
    ours, `ours: THEIR_CODE THEIR_OTHER`; a malformed line raises when the
    adapter's module is loaded, which is when componentize-py builds it."""

    def __init__(self, provider: str, table: str,
                 words: Optional[Dict[str, str]] = None) -> None:
        self.provider = provider
        self.words = words or {}
        self._ours: Dict[str, str] = {}
        for line in table.splitlines():
            if not line.strip():
                continue
            ours, colon, theirs = line.partition(":")
            if not colon or len(ours.split()) != 1 or not theirs.split() or ":" in theirs:
                raise ValueError(
                    f"each line of a failure-code table is `ours: THEIRS…`, not {line!r}")
            for code in theirs.split():
                self._ours[code] = ours.strip()

    def code(self, theirs: str) -> str:
        """Our code for the provider's `theirs` (`operator_error` for any it
        does not list)."""
        return self._ours.get(theirs, OPERATOR_ERROR)

    def failure(self, code: Optional[str], message: Optional[str]) -> Failure:
        """The failure the provider reports with `code` (absent or empty: it
        gave none) and `message`: its words `<provider>: <message> (<code>)`,
        else ours for the code, else `<provider> failure: <code>.`; without a
        code, `operator_error`."""
        if not code:
            return failure(OPERATOR_ERROR,
                           f"{self.provider} reported a failure without a reason.")
        return self.worded(self.code(code), code, message)

    def worded(self, ours: str, theirs: str, message: Optional[str]) -> Failure:
        """The failure `ours` that the provider reported as `theirs` and
        `message`, worded as `failure` words it."""
        if message:
            return failure(ours, f"{self.provider}: {message} ({theirs})")
        if ours in self.words:
            return failure(ours, self.words[ours])
        return failure(ours, f"{self.provider} failure: {theirs}.")
