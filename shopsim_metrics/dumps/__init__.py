"""Readers of the rollout dumps training frameworks already write, as the per-prompt trace of a run.

A user without this package's records has the files their framework writes; each is read into the
:class:`~shopsim_metrics.replay.trace.Trace` that ``replay``, ``prompts`` and ``dashboard html`` take:

- :mod:`.slime` - slime's ``--save-debug-rollout-data PATH_{rollout_id}.pt`` (and ``--dump-details DIR``),
  one ``torch.save`` per step (torch is imported there only);
- :mod:`.verl` - verl's ``trainer.rollout_data_dir``: ``{step}.jsonl``, one line per response;
- :mod:`.groups` - one judged group of a dump, the trace built from them, and the checks every dump passes
  (a step twice, groups of unequal size, a filtered dump read as a whole run);
- :mod:`.sources` - which reader a path needs, and the command-line options every command shares.
"""
