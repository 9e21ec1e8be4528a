"""One rollout step: the contract's names, the accounting of its judgements, its record, the streak and alerts.

The room's modules, by what they answer (each module's docstring says more):

- the names every part shares: ``contract`` (outcomes, reasons, failed checks, field names), ``records``
  (the step record and its ledger rows), ``json_values`` (any value made JSON-native);
- slime's rule and loop: ``drop_rule`` (slime's drop rule, held once), ``loop_state`` (what a rollout loop
  tells the accountant at each judgement);
- a step's accounting: ``accounting`` (judgements to ledger rows, the step's close), ``generated_tokens``
  (every generated token, from the sample hook), ``group_sizes`` (groups of unequal size),
  ``closed_step`` (what the close hands over and the record fields its facts make);
- a step's record: ``draft`` (a record in the making), ``recorder`` (the one assembler; records and alerts
  to the sinks, in order), ``report`` (the per-step table ``inspect`` prints);
- waves: ``wave_planner`` (the one owner of a step's waves), ``wave_size`` (how large a wave must be);
- the fully-async path: ``fully_async_batch`` (which finished group may enter the batch),
  ``fully_async_step`` (one fully-async step);
- what goes wrong: ``streak`` (consecutive technical groups), ``alerts`` (its WARN and ERROR),
  ``advisories`` (what the recent steps say to change), ``warn_once`` (one log warning per kind).

Nothing here imports the monitor, the settings, the run's life (``shopsim_metrics.run``), the prompts room or
the hooks (``tests/test_import_structure.py``).
"""
