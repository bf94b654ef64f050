"""The classroom: the book's assignments on Otter-Grader.

It imports the core (:mod:`opcc_edu`), never the reverse.

* :mod:`opcc_edu.classroom.assignments` -- helpers a student notebook calls: contract checks,
  scoring a confidence function, the design assignment's tuning and held-out halves.
* :mod:`opcc_edu.classroom.teaching` -- building the student and autograder versions (with the
  expected values of the checks) (``opcc-edu assignments build``).
* :mod:`opcc_edu.classroom.grading` -- grading a batch of submissions into a CSV
  (``opcc-edu assignments grade``): :mod:`.sandbox` runs each in private folders with limits,
  :mod:`.runner` is what runs there, :mod:`.review` reads a notebook without running it,
  :mod:`.checks` (and :mod:`.checks_more`) compare, :mod:`.sheet` writes the CSV.
"""
