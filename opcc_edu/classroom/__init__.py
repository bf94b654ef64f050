"""The classroom: the book's assignments on Otter-Grader.

It imports the core (:mod:`opcc_edu`), never the reverse.

* :mod:`opcc_edu.classroom.assignments` -- helpers a student notebook calls: contract checks,
  scoring a confidence function, the design assignment's tuning and held-out halves.
* :mod:`opcc_edu.classroom.teaching` -- building the student and autograder versions (with the
  expected values of the checks) (``opcc-edu assignments build``).
* :mod:`opcc_edu.classroom.grading` -- grading a batch of submissions into a CSV
  (``opcc-edu assignments grade``): :mod:`.intake` reads each file before anything runs,
  :mod:`.isolation` chooses the backend (a bubblewrap sandbox by default), :mod:`.sandbox` runs
  each submission's processes there with limits, :mod:`.runner` is what runs there,
  :mod:`.review` reads a notebook without running it, :mod:`.checks` (and :mod:`.checks_more`)
  compare, :mod:`.sheet` writes the CSV; :mod:`.containers` hands a batch to ``otter grade``
  (``--docker``).
"""
