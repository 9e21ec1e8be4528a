"""A run's per-prompt outcomes: the trace ``replay``, ``prompts`` and ``dashboard html`` take, and its readers.

- :mod:`.trace` - the trace (per prompt, per visit: successes of n, the step, tokens), read from this project's
  records or a JSON trace (:mod:`.json_items` streams a big one);
- :mod:`.slime` - slime's ``--save-debug-rollout-data PATH_{rollout_id}.pt`` (and ``--dump-details DIR``),
  one ``torch.save`` per step (torch is imported there only);
- :mod:`.verl` - verl's ``trainer.rollout_data_dir``: ``{step}.jsonl``, one line per response;
- :mod:`.groups` - one judged group of a dump, the trace built from them, and the checks every dump passes
  (a step twice, groups of unequal size, a filtered dump read as a whole run);
- :mod:`.sources` - which reader a path needs, and the command-line options every command shares.
"""
