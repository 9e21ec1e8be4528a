"""One rollout step: the contract's names, the accounting of its judgements, its record, the streak and alerts."""
