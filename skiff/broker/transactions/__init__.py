"""Transactional messages on the broker: half messages committed, rolled back or
checked back with their producer group (docs/transactions.md).

| module | holds |
|---|---|
| `half.py` | half-message records and the records written for them (commit, op, copy, discard, check) |
| `table.py` | `TransactionTable`: open and closed transactions, half and op progress (pure state) |
| `service.py` | `TransactionService`: END_TRANSACTION, check rounds, recovery, progress |
| `results.py` | `EndStatus` / `EndResult`, `CheckReport`, `TransactionRecovery` |
"""

from skiff.broker.transactions.results import CheckReport, EndResult, EndStatus, Outcome, TransactionRecovery
from skiff.broker.transactions.service import TransactionService

__all__ = ["CheckReport", "EndResult", "EndStatus", "Outcome", "TransactionRecovery", "TransactionService"]
