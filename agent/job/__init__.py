"""One job, (code model, guidance level, task), from turn 0 to success or the last turn: its story
(workflow.JobRun), the agents that act in a turn and the session that holds them, what a run's jobs share
(parts), the turn-0 seeds, the release's replay, the turn record and the result store, where results live
(layout) and what makes a job the same job (fingerprint), and the spending caps checked before each call."""
