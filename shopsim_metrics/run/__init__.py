"""A run's life across processes: who wrote a record, what a checkpoint saves, how a resumed run restores.

- :mod:`.identity` - the writing process's identity in every record (run id, start, sequence);
- :mod:`.state` - the monitor's resumable state, each piece registered once (what is saved, loaded, replayed);
- :mod:`.snapshot` - the monitor's state saved beside slime's checkpoints;
- :mod:`.resume` - a resumed run's restore, from the snapshot and the records after it.

The durable file writes they use (:mod:`shopsim_metrics.state_file`) stay below this room: check-config and
the data source's state use them too.
"""
