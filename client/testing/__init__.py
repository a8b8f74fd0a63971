"""``archmax test`` and ``archmax validate``: case schema, runner, assertions, grader, results,
the report, static validation, and the scripted model the examples' cases run against."""
