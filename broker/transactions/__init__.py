"""The transaction coordinator (KIP-98): transactional ids, their state in `__transaction_state`, markers."""
