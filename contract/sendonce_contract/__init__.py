"""The contract every part of sendonce shares: the email job, its addresses and key tags, and the names of
the ledger, dead-letter and outbox attributes. No dependency: it runs in the Lambda bundle and in app servers."""
