"""ResearchCodeBench: a problem set's papers imported as tasks in the dataset layout (one per snippet), their
requirements and environments, the gold check, and the snippet setting's tasks."""
