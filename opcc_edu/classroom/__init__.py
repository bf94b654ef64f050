"""The classroom: the book's assignments on Otter-Grader.

It imports the core (:mod:`opcc_edu`), never the reverse.

* :mod:`opcc_edu.classroom.assignments` -- helpers a student notebook calls: contract checks,
  scoring a confidence function, the design assignment's tuning and held-out halves.
* :mod:`opcc_edu.classroom.teaching` -- building the student and autograder versions, and
  grading a batch of submissions into a CSV (``opcc-edu assignments``).
"""
