"""The adapter kit for adapters written in Python (componentize-py).

The same rules as the Rust kit (`crates/adapter-kit`), written once so that
an adapter keeps only its provider's wire formats and their mapping:

- `types`: the adapter world's types (`mmc:adapter/types`), re-exported.
- `settings`: settings and secrets, `<key>.<slug>` over `<key>`.
- `spec`: which operators are served and how `describe` says them.
- `exchange`: the outbound exchange and the one rule that decides what its
  ending says about the money (known, unknown, refused, not sent).
- `reasons`: a provider's failure codes, declared as a table.
- `lookup`: an operation found by our id, and `not-found` when it is not.
- `webhook`: headers, signatures compared in constant time, HMAC-signed
  notifications checked against a time window.
- `books`: the provider's books (`NoBooks`: no statement, no balance).
- `entry`: the export guard (an unexpected exception becomes an unknown
  outcome, returned as a value instead of a trap).
"""
