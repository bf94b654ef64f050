"""The lab: the research machinery behind the book's ablation chapters.

It imports the core (:mod:`opcc_edu`), never the reverse.

* :mod:`opcc_edu.lab.experiments` -- the paper's ablations: the registry, grids of runs, the
  resumable results store, executors (local processes or a Ray cluster), analysis and reports.
* :mod:`opcc_edu.lab.findings` -- what a chapter shows: committed results beside the paper's,
  verdicts, the findings at a glance, live runs.
* :mod:`opcc_edu.lab.diagnose` -- where an ensemble's value error comes from (reward, dynamics,
  termination).
* :mod:`opcc_edu.lab.describe` -- what a query set holds and how hard it is.
"""
