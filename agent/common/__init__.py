"""Plumbing that knows nothing of RECODE-H: whole-file atomic writes, private temporary folders, one-line text
forms and fixed-width tables, progress lines for long commands, the harness's version, the set-up hint an entry
command prints for a missing dependency. It imports nothing of ours, so every other folder may use it."""
