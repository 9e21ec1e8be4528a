"""One rollout step: the accounting of its judgements, its close and its record.

The room's modules, by what they answer (each module's docstring says more):

- slime's rule: ``drop_rule`` (slime's drop rule, held once);
- a step's accounting: ``accounting`` (judgements to ledger rows, the step's close), ``generated_tokens``
  (every generated token and the agent episodes, from the sample hook), ``group_sizes`` (groups of unequal
  size), ``closed_step`` (what the close hands over and the record fields its facts make);
- a step's record: ``draft`` (a record in the making), ``recorder`` (the one assembler; records and alerts
  to the sinks, in order).

The rooms below it: ``record`` (the contract's names, the record and its JSON values: what every reader
reads), ``loop`` (what the rollout loop says, and a step's number), ``waves`` (sizing and recording a step's
waves), ``health`` (the technical streak, its alerts, the advisories), ``fully_async`` (slime's fully-async
path). Nothing here imports the monitor, the settings, the run's life (``shopsim_metrics.run``), the prompts
room or the hooks (``tests/test_import_structure.py``).
"""
