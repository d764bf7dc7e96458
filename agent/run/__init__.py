"""A run: the plan of a configuration's (model, level, task) jobs and the scheduler that drives them through an
executor, the record of what the run was (metadata), and the end-of-run table of what it achieved and cost."""
