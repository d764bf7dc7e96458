"""One task on disk: reading the RECODE-H dataset (meta rows, task files, the facts of each test.sh), a private
copy of a task's repository with the path confinement every action obeys, the CodeAgent's actions on that copy
and the lexical retrieval behind RETRIEVE. It imports only agent/common/."""
