"""Running an agent over benchmark items: runner, journal, reply store, spend ledger, rate limits."""
